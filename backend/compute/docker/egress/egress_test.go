package egress

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAllowPrivate(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "false": "", "true": "10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 100.64.0.0/10 fc00::/7",
		"10.1.2.3, 172.30.0.0/16": "10.1.2.3/32 172.30.0.0/16",
	} {
		got, err := ParseAllowPrivate(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, " ") != want {
			t.Errorf("%q: got %v, want %s", in, s, want)
		}
	}
	if _, err := ParseAllowPrivate("10.0.0.0/8,intranet"); err == nil || !strings.Contains(err.Error(), `"intranet"`) {
		t.Fatalf("a host name must be refused by name, got %v", err)
	}
}

func TestHostNameserversSkipsLoopback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("# x\nnameserver 127.0.0.53\nnameserver 10.255.255.53\nnameserver fd00::53\nsearch x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := HostNameservers(path)
	if len(got) != 2 || got[0] != netip.MustParseAddr("10.255.255.53") || got[1] != netip.MustParseAddr("fd00::53") {
		t.Fatalf("got %v", got)
	}
}

func TestParseRule(t *testing.T) {
	for in, want := range map[string]string{"1.2.3.4": "1.2.3.4/32", "10.1.2.3/8": "10.0.0.0/8", "::1": "::1/128", "0.0.0.0/0": "0.0.0.0/0"} {
		p, ok := ParseRule(in)
		if !ok || p.String() != want {
			t.Errorf("%q: got %v %v, want %s", in, p, ok, want)
		}
	}
	for _, in := range []string{"example.com", "*.example.com", "1.2.3.4/33", ""} {
		if _, ok := ParseRule(in); ok {
			t.Errorf("%q must not parse as an address", in)
		}
	}
}

// TestAttachRendersBaseline checks the script of a bridge: the allowed
// private range is excepted from the private drop, link-local dropped.
func TestAttachRendersBaseline(t *testing.T) {
	var script string
	f := New(Config{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
		Nameservers: []netip.Addr{netip.MustParseAddr("10.255.255.53"), netip.MustParseAddr("10.255.255.53")}},
		func(_ context.Context, stdin string, _ ...string) (string, error) { script += stdin; return "", nil })
	if err := f.AttachNetwork(context.Background(), "br-0123456789ab", false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`ip daddr 169.254.0.0/16 counter name dropped_link_local drop`,
		`ip6 daddr fe80::/10 counter name dropped_link_local drop`,
		`ip daddr { 10.255.255.53 } meta l4proto { tcp, udp } th dport 53 accept`,
		`ip daddr != { 172.30.0.0/16 } ip daddr { 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 } counter name dropped_private drop`,
		`add element inet dreadnode nets { "br-0123456789ab" : jump n-br-0123456789ab }`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	// The sandbox's own verdict comes before any port-53 accept: a
	// sandbox denying everything reaches no resolver.
	dnsVerdict := strings.Index(script, "ip daddr { 10.255.255.53 } meta l4proto { tcp, udp } th dport 53 ether saddr vmap @sandboxes\n")
	if accept := strings.Index(script, "dport 53 accept"); dnsVerdict < 0 || accept < dnsVerdict {
		t.Errorf("port 53 to the resolvers is accepted before the sandbox's own verdict:\n%s", script)
	}
	if err := f.AttachNetwork(context.Background(), `br-x"; flush ruleset`, false); err == nil {
		t.Fatal("an unusable bridge name must be refused")
	}
}

func TestParseCounters(t *testing.T) {
	out := "table inet dreadnode {\n\tcounter dropped_link_local {\n\t\tpackets 3 bytes 180\n\t}\n\tcounter dropped_policy {\n\t\tpackets 0 bytes 0\n\t}\n}\n"
	got := parseCounters(out)
	if got["link_local"] != 3 || got["policy"] != 0 || len(got) != 2 {
		t.Fatalf("got %v", got)
	}
}

// TestAttachEnvironmentRenders: an environment's chain allows only its
// declared addresses past the baseline and ends in the counted policy
// drop; one declaring nothing also loses the DNS forwarding. Every drop is
// accounted per sender in @drops by a rule of its own before the drop.
func TestAttachEnvironmentRenders(t *testing.T) {
	var script string
	f := New(Config{Nameservers: []netip.Addr{netip.MustParseAddr("10.255.255.53")}},
		func(_ context.Context, stdin string, _ ...string) (string, error) { script = stdin; return "", nil })
	if err := f.AttachEnvironment(context.Background(), "br-0123456789ab", []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"n-br-0123456789ab ip daddr { 192.0.2.0/24 } accept\n",
		"n-br-0123456789ab ip6 daddr { 2001:db8::/32 } accept\n",
		"n-br-0123456789ab update @drops { ether saddr . 4 }\nadd rule inet dreadnode n-br-0123456789ab counter name dropped_policy drop\n",
		"ip daddr 169.254.0.0/16 update @drops { ether saddr . 1 }\nadd rule inet dreadnode n-br-0123456789ab ip daddr 169.254.0.0/16 counter name dropped_link_local drop\n",
		"th dport 53 accept",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "vmap @sandboxes") {
		t.Errorf("an environment's chain looks up sandbox chains:\n%s", script)
	}
	if err := f.AttachEnvironment(context.Background(), "br-0123456789ab", nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(script, "dport 53 accept") || strings.Contains(script, " accept\nadd rule inet dreadnode n-br-0123456789ab update @drops { ether saddr . 4 }") {
		t.Errorf("an environment declaring nothing lets something out:\n%s", script)
	}
}

func TestParseDrops(t *testing.T) {
	out := "table inet dreadnode {\n\tset drops {\n\t\ttype ether_addr . mark\n\t\tsize 65536\n\t\tflags dynamic\n\t\tcounter\n" +
		"\t\telements = { 02:42:ac:11:00:02 . 0x00000004 counter packets 12 bytes 720,\n\t\t\t     02:42:AC:11:00:02 . 0x00000001 counter packets 3 bytes 180,\n" +
		"\t\t\t     02:42:ac:11:00:03 . 0x00000063 counter packets 9 bytes 1 }\n\t}\n}\n"
	got := parseDrops(out)
	if len(got) != 1 || got["02:42:ac:11:00:02"]["policy"] != 12 || got["02:42:ac:11:00:02"]["link_local"] != 3 {
		t.Fatalf("got %v", got)
	}
}
