package egress

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
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

// TestForwarderAnswersByPolicy runs the forwarder in the test's own network
// namespace against a test upstream on 127.0.0.1: an allowed name is
// answered and its address opened (once for repeated answers), another
// name gets NXDOMAIN without being asked upstream.
func TestForwarderAnswersByPolicy(t *testing.T) {
	upstream, asked := testUpstream(t, map[string]string{"allowed.test.": "192.0.2.7", "other.test.": "192.0.2.8"})
	var mu sync.Mutex
	var scripts []string
	fw := New(Config{}, func(_ context.Context, stdin string, _ ...string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		scripts = append(scripts, stdin)
		return "", nil
	})
	d := NewForwarder(fw, []netip.AddrPort{upstream})
	t.Cleanup(d.Close)
	var addr netip.AddrPort
	for attempt := 0; ; attempt++ { // a free UDP port may be taken on TCP: try another
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = netip.MustParseAddrPort(pc.LocalAddr().String())
		pc.Close()
		err = d.ServeIn("02:00:00:00:00:07", "/proc/thread-self/ns/net", addr, Client{MAC: "02:00:00:00:00:07", Names: []string{"allowed.test"}, DenyAll: true})
		if err == nil {
			break
		}
		if attempt == 20 {
			t.Fatal(err)
		}
	}
	ask := func(name string) *dns.Msg {
		t.Helper()
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(q, addr.String())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for range 3 {
		if r := ask("allowed.test."); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
			t.Fatalf("allowed.test: %v", r)
		}
	}
	mu.Lock()
	if len(scripts) != 1 || !strings.Contains(scripts[0], "02:00:00:00:00:07 . 192.0.2.7 timeout 60s") {
		t.Errorf("three answers must open the address once: %q", scripts)
	}
	mu.Unlock()
	if r := ask("other.test."); r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
		t.Errorf("other.test: %v", r)
	}
	if n := asked("other.test."); n != 0 {
		t.Errorf("other.test was asked upstream %d times", n)
	}
	d.Stop("02:00:00:00:00:07")
	if len(d.Serving()) != 0 {
		t.Errorf("still serving after Stop: %v", d.Serving())
	}
}

func testUpstream(t *testing.T, zone map[string]string) (netip.AddrPort, func(string) int) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	asks := map[string]int{}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		mu.Lock()
		asks[q.Question[0].Name]++
		mu.Unlock()
		if ip, ok := zone[q.Question[0].Name]; ok {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP(ip)})
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return netip.MustParseAddrPort(pc.LocalAddr().String()), func(n string) int { mu.Lock(); defer mu.Unlock(); return asks[n] }
}
