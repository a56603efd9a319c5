package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// Tests of the forwarder's per-sandbox bounds (issue 34, item 2), each in
// the test's own network namespace against a resolver of the test's own on
// 127.0.0.1: one sandbox flooding the forwarder slows no other.

// boundsUpstream answers over UDP and TCP: NAME.addr.test. with the
// address NAME (dashes for dots), slow.test. only once release is closed
// (counting those waiting), big.test. with a TXT of about 50 KB, anything
// else with 192.0.2.1.
type boundsUpstream struct {
	addr    netip.AddrPort
	waiting atomic.Int64
	release chan struct{}
}

func newBoundsUpstream(t *testing.T) *boundsUpstream {
	t.Helper()
	u := &boundsUpstream{release: make(chan struct{})}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := q.Question[0].Name
		hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: 60}
		switch {
		case name == "slow.test.":
			u.waiting.Add(1)
			<-u.release
			u.waiting.Add(-1)
			return
		case name == "big.test.":
			hdr.Rrtype = dns.TypeTXT
			txt := make([]string, 200)
			for i := range txt {
				txt[i] = strings.Repeat("x", 250)
			}
			m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr, Txt: txt})
		case strings.HasSuffix(name, ".addr.test."):
			hdr.Rrtype = dns.TypeA
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.ParseIP(strings.ReplaceAll(strings.TrimSuffix(name, ".addr.test."), "-", "."))})
		default:
			hdr.Rrtype = dns.TypeA
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.ParseIP("192.0.2.1")})
		}
		_ = w.WriteMsg(m)
	})
	for attempt := 0; ; attempt++ { // the UDP port's number may be taken on TCP: try another
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			if attempt == 20 {
				t.Fatal(err)
			}
			continue
		}
		u.addr = netip.MustParseAddrPort(pc.LocalAddr().String())
		for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
			started := make(chan struct{})
			srv.NotifyStartedFunc = func() { close(started) }
			go func() { _ = srv.ActivateAndServe() }()
			<-started
			t.Cleanup(func() { _ = srv.Shutdown() })
		}
		t.Cleanup(func() { close(u.release) }) // runs first: frees the handlers Shutdown waits for
		return u
	}
}

// recordingFirewall is a Firewall whose nft scripts are kept, not run.
func recordingFirewall() (*Firewall, func() string) {
	var mu sync.Mutex
	var all strings.Builder
	fw := New(Config{}, func(_ context.Context, stdin string, _ ...string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		all.WriteString(stdin)
		return "", nil
	})
	return fw, func() string { mu.Lock(); defer mu.Unlock(); return all.String() }
}

// serveTest serves c on a free loopback port of the test's namespace.
func serveTest(t *testing.T, d *Forwarder, c Client) netip.AddrPort {
	t.Helper()
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := netip.MustParseAddrPort(pc.LocalAddr().String())
		pc.Close()
		if err = d.ServeIn(c.MAC, "/proc/thread-self/ns/net", addr, c); err == nil {
			return addr
		}
		if attempt == 20 {
			t.Fatal(err)
		}
	}
}

func askOver(t *testing.T, netw string, addr netip.AddrPort, name string, qtype uint16) (*dns.Msg, error) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Net: netw, Timeout: 10 * time.Second}).Exchange(q, addr.String())
	return r, err
}

// TestForwarderFloodSlowsNoOtherSandbox: sandbox A keeps every query slot
// it has waiting on a stuck upstream and keeps flooding; sandbox B's
// allowed name is still answered and opened. (With one pool for every
// sandbox, A's flood takes every slot and B gets SERVFAIL.)
func TestForwarderFloodSlowsNoOtherSandbox(t *testing.T) {
	up := newBoundsUpstream(t)
	fw, scripts := recordingFirewall()
	d := NewForwarder(fw, []netip.AddrPort{up.addr})
	t.Cleanup(d.Close)
	a := serveTest(t, d, Client{MAC: "02:00:00:00:00:0a", Names: []string{"slow.test"}, DenyAll: true})
	b := serveTest(t, d, Client{MAC: "02:00:00:00:00:0b", Names: []string{"fast.test"}, DenyAll: true})

	conn, err := net.Dial("udp", a.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stop := make(chan struct{})
	flooded := make(chan struct{})
	go func() { // A floods: a query every 200 µs, answers never read
		defer close(flooded)
		q := new(dns.Msg)
		q.SetQuestion("slow.test.", dns.TypeA)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			q.Id = uint16(i)
			b, _ := q.Pack()
			_, _ = conn.Write(b)
			time.Sleep(200 * time.Microsecond) // pacing, not synchronisation
		}
	}()
	t.Cleanup(func() { close(stop); <-flooded })
	poll.Until(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n := up.waiting.Load(); n < int64(d.maxInFlight) {
			return fmt.Errorf("A holds %d of its %d slots", n, d.maxInFlight)
		}
		return nil
	})
	for i := range 20 {
		r, err := askOver(t, "udp", b, "fast.test.", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("B's query %d while A floods: %v %v", i, r, err)
		}
	}
	if !strings.Contains(scripts(), "02:00:00:00:00:0b . 192.0.2.1") {
		t.Errorf("B's answer was not opened to B: %q", scripts())
	}
}

// TestForwarderTCPBoundsPerSandbox: sandbox A opens as many TCP
// connections as it may and stops reading their (large) answers; its
// next connection is served once the write deadline has closed a stalled
// one, and sandbox B is served meanwhile. (Without the write deadline the
// stalled connections stay, and A's next query is never answered.)
func TestForwarderTCPBoundsPerSandbox(t *testing.T) {
	up := newBoundsUpstream(t)
	fw, _ := recordingFirewall()
	d := NewForwarder(fw, []netip.AddrPort{up.addr})
	d.maxConns = 2
	t.Cleanup(d.Close)
	a := serveTest(t, d, Client{MAC: "02:00:00:00:00:0a", Names: []string{"big.test"}})
	b := serveTest(t, d, Client{MAC: "02:00:00:00:00:0b", Names: []string{"fast.test"}})

	// A small receive buffer, never read: the forwarder's writes block.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	}}
	q := new(dns.Msg)
	q.SetQuestion("big.test.", dns.TypeTXT)
	for range d.maxConns {
		c, err := dialer.Dial("tcp", a.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		dc := &dns.Conn{Conn: c}
		for i := range 100 { // pipelined: about 5 MB of answers
			q.Id = uint16(i)
			if err := dc.WriteMsg(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r, err := askOver(t, "tcp", b, "fast.test.", dns.TypeA); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("B over TCP while A's connections stall: %v %v", r, err)
	}
	r, err := askOver(t, "tcp", a, "big.test.", dns.TypeTXT)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("A's next connection: want an answer once a stalled one is closed (write deadline %s), got %v %v", writeTimeout, r, err)
	}
}

// TestForwarderBoundsResolvedAddresses: a sandbox opens at most
// maxResolved addresses; past them its answers get SERVFAIL and nothing is
// added to the sets, while another sandbox's answers are still opened.
func TestForwarderBoundsResolvedAddresses(t *testing.T) {
	up := newBoundsUpstream(t)
	fw, scripts := recordingFirewall()
	d := NewForwarder(fw, []netip.AddrPort{up.addr})
	d.maxResolved = 4
	t.Cleanup(d.Close)
	a := serveTest(t, d, Client{MAC: "02:00:00:00:00:0a", Names: []string{"*.addr.test"}, DenyAll: true})
	b := serveTest(t, d, Client{MAC: "02:00:00:00:00:0b", Names: []string{"*.addr.test"}, DenyAll: true})
	for i := 1; i <= 6; i++ {
		r, err := askOver(t, "udp", a, fmt.Sprintf("192-0-2-%d.addr.test.", i), dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		want := dns.RcodeSuccess
		if i > d.maxResolved {
			want = dns.RcodeServerFailure
		}
		if r.Rcode != want {
			t.Errorf("A's address %d: rcode %s, want %s", i, dns.RcodeToString[r.Rcode], dns.RcodeToString[want])
		}
	}
	// A known address renews; it needs no new room.
	if r, err := askOver(t, "udp", a, "192-0-2-1.addr.test.", dns.TypeA); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("A's first address again: %v %v", r, err)
	}
	if r, err := askOver(t, "udp", b, "198-51-100-9.addr.test.", dns.TypeA); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("B's address while A is full: %v %v", r, err)
	}
	s := scripts()
	if n := strings.Count(s, "add element inet dreadnode resolved4 { 02:00:00:00:00:0a . 192.0.2.") / 2; n != d.maxResolved {
		t.Errorf("A had %d addresses opened, want %d:\n%s", n, d.maxResolved, s)
	}
	if !strings.Contains(s, "02:00:00:00:00:0b . 198.51.100.9 timeout") {
		t.Errorf("B's address was not opened:\n%s", s)
	}
}
