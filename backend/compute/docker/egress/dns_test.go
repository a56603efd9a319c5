package egress

import (
	"context"
	"strings"
	"testing"
	"time"

	"net/netip"
)

func TestParseAndMatchNames(t *testing.T) {
	for in, want := range map[string]string{"API.Example.com.": "api.example.com", "*.example.com": "*.example.com", " x_y.test ": "x_y.test"} {
		if got, ok := ParseName(in); !ok || got != want {
			t.Errorf("%q: got %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "*", "*.", "localhost", "*.*.example.com", "a.*.example.com", "exa mple.com", "-a.example.com", "1.2.3.4", "example.com/24", "*.com."} {
		if got, ok := ParseName(in); ok {
			t.Errorf("%q must not parse as a domain name, got %q", in, got)
		}
	}
	pats := []string{"allowed.test", "*.wild.test"}
	for name, want := range map[string]bool{
		"allowed.test": true, "ALLOWED.test.": true, "x.allowed.test": false, "notallowed.test": false,
		"a.wild.test": true, "a.b.wild.test.": true, "wild.test": false, "xwild.test": false,
	} {
		if MatchName(pats, name) != want {
			t.Errorf("MatchName(%q) = %v, want %v", name, !want, want)
		}
	}
}

// TestAllowResolvedScript: each address is keyed by the sandbox's MAC, its
// timeout bounded and renewed (add, delete, add in one transaction).
func TestAllowResolvedScript(t *testing.T) {
	var script string
	f := New(Config{}, func(_ context.Context, stdin string, _ ...string) (string, error) { script += stdin; return "", nil })
	err := f.AllowResolved(context.Background(), "02:00:00:00:00:01", []Resolved{
		{Addr: netip.MustParseAddr("192.0.2.1"), TTL: time.Second},
		{Addr: netip.MustParseAddr("2001:db8::1"), TTL: 30 * 24 * time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"add element inet dreadnode resolved4 { 02:00:00:00:00:01 . 192.0.2.1 }\ndelete element inet dreadnode resolved4 { 02:00:00:00:00:01 . 192.0.2.1 }\nadd element inet dreadnode resolved4 { 02:00:00:00:00:01 . 192.0.2.1 timeout 60s }",
		"add element inet dreadnode resolved6 { 02:00:00:00:00:01 . 2001:db8::1 timeout 3600s }",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if err := f.AllowResolved(context.Background(), "02:00:00:00:00:01; flush ruleset", nil); err == nil {
		t.Fatal("an unusable MAC must be refused")
	}
}
