package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"
)

// Domain names in allowOut are enforced on DNS answers. A sandbox whose
// policy names domains gets the Forwarder as the upstream of the engine's
// embedded DNS: sockets the backend opens inside the sandbox's own network
// namespace (ServeIn), on a loopback address the engine's DNS forwards to
// from that namespace. The Forwarder resolves only what the sandbox's
// policy lets through and, before it answers, adds the answer's addresses
// to the set @resolved4 / @resolved6 keyed by the sandbox's MAC address and
// the address, with a timeout near the answer's TTL: the connection that
// follows matches "ether saddr . ip daddr @resolved4 accept" in the
// sandbox's own chain. A name one sandbox resolved is keyed by its MAC, so
// it never opens anything for another.

// Bounds of the timeout of a resolved address: an answer with a TTL of a
// second must outlive the connect that follows it, one of a week must not
// keep an address open long after the name moved.
const (
	MinResolvedTTL = 60 * time.Second
	MaxResolvedTTL = time.Hour
)

// resolvedSize bounds the sets of resolved addresses (entries expire).
const resolvedSize = 262144

// resolvedSets declares the sets of resolved addresses (idempotent).
func resolvedSets() string {
	return fmt.Sprintf("add set inet %[1]s resolved4 { type ether_addr . ipv4_addr; flags timeout; size %[2]d; }\n"+
		"add set inet %[1]s resolved6 { type ether_addr . ipv6_addr; flags timeout; size %[2]d; }\n", Table, resolvedSize)
}

// ParseName reads one domain entry of allowOut: an exact name
// ("api.example.com") or a wildcard of its subdomains ("*.example.com",
// which does not match example.com itself). It returns the canonical form
// (lower case, no trailing dot); ok is false for anything else.
func ParseName(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(s), "."))
	base := strings.TrimPrefix(s, "*.")
	if base == "" || len(base) > 253 || strings.Contains(base, "*") || !strings.Contains(base, ".") {
		return "", false
	}
	if _, ok := dns.IsDomainName(base); !ok {
		return "", false
	}
	for _, label := range strings.Split(base, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", false
		}
		if strings.TrimLeft(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return "", false
		}
	}
	if _, err := netip.ParseAddr(base); err == nil {
		return "", false
	}
	return s, true
}

// MatchName reports whether name (any case, trailing dot or not) is let
// through by one of the canonical patterns of ParseName.
func MatchName(patterns []string, name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, p := range patterns {
		if base, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(name, "."+base) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// Client is what the Forwarder knows of the sandbox it serves.
type Client struct {
	// MAC keys the sandbox's resolved addresses.
	MAC string
	// Names are its allowOut domain patterns (ParseName's form).
	Names []string
	// DenyAll: its denyOut covers 0.0.0.0/0, so no other name is useful
	// to it and none is resolved (NXDOMAIN).
	DenyAll bool
}

// Forwarder is the DNS server of sandboxes with domain names in allowOut
// or a denyOut covering every address (see above). It serves each sandbox on sockets of its own, opened inside
// the sandbox's network namespace (ServeIn): the engine's embedded DNS
// reaches them without leaving the namespace, so no host port is open to
// sandboxes and a query's sandbox is known by the socket it came to, never
// guessed from a source address. It is safe for concurrent use.
type Forwarder struct {
	fw        *Firewall
	upstreams []string
	timeout   time.Duration

	mu      sync.Mutex
	serving map[string]*served // by key (the sandbox's MAC)
	// opened remembers, per sandbox (by lower-case MAC), until when each
	// address is open to it: repeated answers renew an address only past
	// half its timeout (a sandbox asking in a loop costs no nft
	// transaction per query), and a sandbox has at most maxResolved
	// addresses open, so none fills the sets every sandbox shares.
	opened map[string]map[netip.Addr]time.Time
	// Per-sandbox bounds (the package's defaults; tests lower them).
	maxInFlight, maxConns, maxResolved int
}

// Each sandbox is served within bounds of its own, so one that floods the
// forwarder slows no other:
//   - maxInFlight queries waiting on an upstream at once (a query beyond
//     gets SERVFAIL at once; a name its policy refuses needs no slot, nor
//     does writing the answer);
//   - maxConns TCP connections at once (more wait in the kernel's
//     backlog), each read within readTimeout (idleTimeout between
//     queries) and written within writeTimeout, so a client that stops
//     reading holds nothing for long;
//   - maxResolved addresses open at once in the resolved sets (an answer
//     that would open more gets SERVFAIL); the sets hold resolvedSize for
//     every sandbox together.
const (
	maxInFlightPerSandbox = 64
	maxConnsPerSandbox    = 16
	maxResolvedPerSandbox = 512
	readTimeout           = 2 * time.Second
	idleTimeout           = 5 * time.Second
	writeTimeout          = 2 * time.Second
)

type served struct {
	ns   uint64 // inode of the network namespace served
	srvs []*dns.Server
}

// NewForwarder returns a Forwarder asking upstreams and recording answers
// in fw.
func NewForwarder(fw *Firewall, upstreams []netip.AddrPort) *Forwarder {
	d := &Forwarder{fw: fw, timeout: 3 * time.Second, serving: map[string]*served{}, opened: map[string]map[netip.Addr]time.Time{},
		maxInFlight: maxInFlightPerSandbox, maxConns: maxConnsPerSandbox, maxResolved: maxResolvedPerSandbox}
	for _, u := range upstreams {
		d.upstreams = append(d.upstreams, u.String())
	}
	return d
}

// ServeIn serves c on addr (UDP and TCP) inside the network namespace at
// nsPath (/proc/<pid>/ns/net of the sandbox's process), under key
// (idempotent while the namespace is the same; a new namespace, after the
// sandbox restarted, replaces the old sockets).
func (d *Forwarder) ServeIn(key, nsPath string, addr netip.AddrPort, c Client) error {
	var st syscall.Stat_t
	if err := syscall.Stat(nsPath, &st); err != nil {
		return fmt.Errorf("the sandbox's network namespace is gone: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.serving[key]; ok {
		if s.ns == st.Ino {
			return nil
		}
		shutdown(s)
		delete(d.serving, key)
	}
	pc, ln, err := listenIn(nsPath, addr)
	if err != nil {
		return fmt.Errorf("the DNS forwarder cannot listen on %s in the sandbox's network namespace: %w", addr, err)
	}
	slots := make(chan struct{}, d.maxInFlight)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) { d.serve(w, q, c, slots) })
	idle := func() time.Duration { return idleTimeout }
	s := &served{ns: st.Ino, srvs: []*dns.Server{{PacketConn: pc, Handler: h},
		{Listener: netutil.LimitListener(writeDeadlines{ln}, d.maxConns), Handler: h, ReadTimeout: readTimeout, IdleTimeout: idle}}}
	for _, srv := range s.srvs {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
	}
	d.serving[key] = s
	return nil
}

// listenIn opens the sockets inside another network namespace, from a
// thread of its own that ends with them (it is never returned to the
// runtime in the sandbox's namespace). The sockets keep their namespace.
func listenIn(nsPath string, addr netip.AddrPort) (net.PacketConn, net.Listener, error) {
	type result struct {
		pc  net.PacketConn
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		var r result
		defer func() { ch <- r }()
		f, err := os.Open(nsPath)
		if err != nil {
			r.err = err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			r.err = fmt.Errorf("entering the sandbox's network namespace: %w", err)
			return
		}
		// SO_REUSEPORT: backends of one deployment sharing the engine may
		// each serve a sandbox (a replica starting while another creates
		// it), with the same policy, read from the sandbox's labels.
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
				return err
			}
			return serr
		}}
		if r.pc, r.err = lc.ListenPacket(context.Background(), "udp", addr.String()); r.err != nil {
			return
		}
		if r.ln, r.err = lc.Listen(context.Background(), "tcp", addr.String()); r.err != nil {
			r.pc.Close()
		}
	}()
	r := <-ch
	return r.pc, r.ln, r.err
}

func shutdown(s *served) {
	for _, srv := range s.srvs {
		_ = srv.Shutdown()
	}
}

// Stop closes the sockets served under key (the sandbox is deleted).
func (d *Forwarder) Stop(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.serving[key]; ok {
		shutdown(s)
		delete(d.serving, key)
	}
	delete(d.opened, strings.ToLower(key))
}

// Serving lists the keys served, for the sweep of deleted sandboxes.
func (d *Forwarder) Serving() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.serving))
	for k := range d.serving {
		out = append(out, k)
	}
	return out
}

// Close stops every sandbox's sockets.
func (d *Forwarder) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, s := range d.serving {
		shutdown(s)
		delete(d.serving, k)
	}
}

func reply(w dns.ResponseWriter, q *dns.Msg, rcode int) {
	m := new(dns.Msg)
	m.SetRcode(q, rcode)
	m.RecursionAvailable = true
	_ = w.WriteMsg(m)
}

func (d *Forwarder) serve(w dns.ResponseWriter, q *dns.Msg, c Client, slots chan struct{}) {
	if q.Opcode != dns.OpcodeQuery || len(q.Question) != 1 {
		reply(w, q, dns.RcodeRefused)
		return
	}
	allowed := MatchName(c.Names, q.Question[0].Name)
	if !allowed && c.DenyAll {
		reply(w, q, dns.RcodeNameError)
		return
	}
	resp, rcode := d.answer(q, w.RemoteAddr().Network(), c.MAC, allowed, slots)
	if resp == nil {
		reply(w, q, rcode)
		return
	}
	resp.Id = q.Id
	_ = w.WriteMsg(resp) // after the slot is freed: a slow reader holds none
}

// answer asks the upstreams and records an allowed answer, in one of the
// sandbox's slots; nil with the rcode to answer when it cannot.
func (d *Forwarder) answer(q *dns.Msg, proto, mac string, allowed bool, slots chan struct{}) (*dns.Msg, int) {
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		return nil, dns.RcodeServerFailure
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*d.timeout)
	defer cancel()
	resp, err := d.exchange(ctx, q, proto)
	if err != nil {
		return nil, dns.RcodeServerFailure
	}
	if allowed {
		if err := d.record(ctx, mac, resp); err != nil {
			return nil, dns.RcodeServerFailure
		}
	}
	return resp, dns.RcodeSuccess
}

// writeDeadlines gives every accepted connection a deadline on each write
// (miekg/dns sets read deadlines but no write deadline: a client that
// stops reading would hold its connection, and its place under maxConns,
// for good).
type writeDeadlines struct{ net.Listener }

func (l writeDeadlines) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return deadlineConn{c}, nil
}

type deadlineConn struct{ net.Conn }

// Write closes the connection when the write fails (its deadline passed):
// the queries a client pipelined behind would each wait the deadline again.
func (c deadlineConn) Write(b []byte) (int, error) {
	err := c.SetWriteDeadline(time.Now().Add(writeTimeout))
	n := 0
	if err == nil {
		n, err = c.Conn.Write(b)
	}
	if err != nil {
		_ = c.Conn.Close()
	}
	return n, err
}

// errResolvedFull: the sandbox has maxResolved addresses open already.
var errResolvedFull = errors.New("the sandbox has as many resolved addresses open as it may")

// record adds the answer's addresses to the sandbox's resolved sets. The
// addresses are counted against the sandbox's bound before nft runs (and
// uncounted if it fails), so concurrent answers cannot pass it together.
func (d *Forwarder) record(ctx context.Context, mac string, resp *dns.Msg) error {
	var rs []Resolved
	now := time.Now()
	key := strings.ToLower(mac)
	d.mu.Lock()
	open := d.opened[key]
	if open == nil {
		open = map[netip.Addr]time.Time{}
		d.opened[key] = open
	}
	for _, rr := range resp.Answer {
		ttl := min(max(time.Duration(rr.Header().Ttl)*time.Second, MinResolvedTTL), MaxResolvedTTL)
		var a netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			a, _ = netip.AddrFromSlice(rr.A)
		case *dns.AAAA:
			a, _ = netip.AddrFromSlice(rr.AAAA)
		}
		if a = a.Unmap(); !a.IsValid() {
			continue
		}
		if until, ok := open[a]; ok && until.Sub(now) > ttl/2 {
			continue // open long enough already
		}
		rs = append(rs, Resolved{Addr: a, TTL: ttl})
	}
	if fresh := newAddrs(open, rs); len(open)+fresh > d.maxResolved {
		for a, until := range open {
			if !until.After(now) {
				delete(open, a) // expired in the sets too
			}
		}
		if len(open)+fresh > d.maxResolved {
			d.mu.Unlock()
			return errResolvedFull
		}
	}
	prev := make(map[netip.Addr]time.Time, len(rs))
	for _, r := range rs {
		if until, ok := open[r.Addr]; ok {
			prev[r.Addr] = until
		}
		open[r.Addr] = now.Add(r.TTL)
	}
	d.mu.Unlock()
	err := d.fw.AllowResolved(ctx, mac, rs)
	if err != nil {
		d.mu.Lock()
		for _, r := range rs {
			if until, ok := prev[r.Addr]; ok {
				open[r.Addr] = until
			} else {
				delete(open, r.Addr)
			}
		}
		d.mu.Unlock()
	}
	return err
}

// newAddrs counts the addresses of rs not yet in open.
func newAddrs(open map[netip.Addr]time.Time, rs []Resolved) int {
	n := 0
	for _, r := range rs {
		if _, ok := open[r.Addr]; !ok {
			n++
		}
	}
	return n
}

// exchange asks the upstreams in turn (over TCP when the answer was
// truncated or the sandbox asked over TCP).
func (d *Forwarder) exchange(ctx context.Context, q *dns.Msg, proto string) (*dns.Msg, error) {
	if len(d.upstreams) == 0 {
		return nil, errors.New("no upstream resolver")
	}
	var last error
	for _, u := range d.upstreams {
		netw := "udp"
		if strings.HasPrefix(proto, "tcp") {
			netw = "tcp"
		}
		for {
			cl := &dns.Client{Net: netw, Timeout: d.timeout}
			resp, _, err := cl.ExchangeContext(ctx, q.Copy(), u)
			if err == nil && resp.Truncated && netw == "udp" {
				netw = "tcp"
				continue
			}
			if err == nil && resp.Rcode != dns.RcodeServerFailure {
				return resp, nil
			}
			if err == nil {
				err = fmt.Errorf("%s answered SERVFAIL", u)
			}
			last = err
			break
		}
	}
	return nil, last
}

// Resolved is one address of a DNS answer and its TTL.
type Resolved struct {
	Addr netip.Addr
	TTL  time.Duration
}

// AllowResolved opens addrs to the sandbox with this MAC for about their
// TTL (bounded by MinResolvedTTL and MaxResolvedTTL). An address already
// open gets its timeout renewed. One nft transaction.
func (f *Firewall) AllowResolved(ctx context.Context, mac string, addrs []Resolved) error {
	mac = strings.ToLower(mac)
	if !macPattern.MatchString(mac) {
		return fmt.Errorf("MAC address %q is not usable", mac)
	}
	if len(addrs) == 0 {
		return nil
	}
	var b strings.Builder
	for _, r := range addrs {
		set := "resolved4"
		if !r.Addr.Unmap().Is4() {
			set = "resolved6"
		}
		ttl := min(max(r.TTL, MinResolvedTTL), MaxResolvedTTL)
		elem := fmt.Sprintf("%s . %s", mac, r.Addr.Unmap())
		// add-delete-add renews the timeout of an element already there.
		fmt.Fprintf(&b, "add element inet %[1]s %[2]s { %[3]s }\ndelete element inet %[1]s %[2]s { %[3]s }\nadd element inet %[1]s %[2]s { %[3]s timeout %[4]ds }\n",
			Table, set, elem, int(ttl/time.Second))
	}
	if err := f.apply(ctx, b.String()); err != nil {
		return fmt.Errorf("opening the resolved addresses of sandbox %s: %w", mac, err)
	}
	return nil
}
