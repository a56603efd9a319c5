package agent

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvExposeLoopback, set to "1", makes the agent re-expose the sandbox's
// loopback listeners (LoopbackForwarder). The Docker provider sets it for
// sandboxes created through the E2B edge only: E2B's envd does this
// (packages/envd/internal/port), and E2B's clients start servers on
// 127.0.0.1 or ::1 and reach them through the proxy; a native sandbox's
// loopback stays its own.
const EnvExposeLoopback = "DN_AGENT_EXPOSE_LOOPBACK"

// loopbackScanEvery is how often the listeners are read: E2B's envd scans
// as often, so a server is reachable within about a second of listening.
const loopbackScanEvery = time.Second

// LoopbackForwarder makes every TCP server listening only on the sandbox's
// loopback (127.0.0.1 or ::1) reachable on the sandbox's own addresses, on
// the same port, as E2B's envd does with socat: each connection accepted
// there is copied to and from the loopback listener.
//
// It reads the listeners of its own network namespace (/proc/net/tcp{,6}),
// so it forwards only the sandbox's; it binds only the addresses it is
// given (the sandbox's interfaces'), never a wildcard, so a server the
// sandbox also binds there later is not shadowed for long and nothing of
// the host is ever involved.
type LoopbackForwarder struct {
	// Scan lists the loopback listeners: port -> the loopback address to dial.
	Scan func() (map[int]netip.Addr, error)
	// Addrs lists the addresses to expose each port on.
	Addrs func() ([]netip.Addr, error)

	mu  sync.Mutex
	fwd map[int][]net.Listener // port -> our listeners
}

// NewLoopbackForwarder scans this network namespace and exposes on its
// non-loopback interface addresses.
func NewLoopbackForwarder() *LoopbackForwarder {
	return &LoopbackForwarder{Scan: ScanLoopbackListeners, Addrs: interfaceAddrs}
}

// Run scans until ctx ends, then closes every listener it opened.
func (f *LoopbackForwarder) Run(ctx context.Context) {
	t := time.NewTicker(loopbackScanEvery)
	defer t.Stop()
	for {
		f.Sync()
		select {
		case <-ctx.Done():
			f.mu.Lock()
			for p, ls := range f.fwd {
				closeAll(ls)
				delete(f.fwd, p)
			}
			f.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// Sync forwards the listeners of one scan: it starts forwarding the new
// ones and stops forwarding those that went away.
func (f *LoopbackForwarder) Sync() {
	ports, err := f.Scan()
	if err != nil {
		return // no /proc (not Linux): nothing to forward
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fwd == nil {
		f.fwd = map[int][]net.Listener{}
	}
	for p, ls := range f.fwd {
		if _, ok := ports[p]; !ok {
			closeAll(ls)
			delete(f.fwd, p)
		}
	}
	var addrs []netip.Addr
	for p, target := range ports {
		if _, ok := f.fwd[p]; ok {
			continue
		}
		if addrs == nil {
			if addrs, err = f.Addrs(); err != nil || len(addrs) == 0 {
				return
			}
		}
		var ls []net.Listener
		for _, a := range addrs {
			// Fails when something (the sandbox's own server on that
			// address, or a wildcard one) holds the port: it is reachable then.
			if l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", netip.AddrPortFrom(a, uint16(p)).String()); err == nil {
				ls = append(ls, l)
				go forwardAccepted(l, netip.AddrPortFrom(target, uint16(p)).String())
			}
		}
		f.fwd[p] = ls // tried once per appearance, even if nothing bound
	}
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// forwardAccepted copies each connection l accepts to and from target,
// until l is closed.
func forwardAccepted(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			u, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			half := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite() // the other way may still be sending
				}
				done <- struct{}{}
			}
			go half(u, c)
			go half(c, u)
			<-done
			<-done
		}()
	}
}

// interfaceAddrs are the sandbox's own unicast addresses (not loopback,
// not link-local).
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || !ip.IsGlobalUnicast() && !ip.IsPrivate() {
			continue
		}
		out = append(out, ip)
	}
	return out, nil
}

// ScanLoopbackListeners reads /proc/net/tcp and /proc/net/tcp6 (this
// network namespace's sockets) for listeners bound to a loopback address
// only: port -> where to dial it (127.0.0.1 preferred over ::1).
func ScanLoopbackListeners() (map[int]netip.Addr, error) {
	out := map[int]netip.Addr{}
	var errs []error
	for _, file := range []string{"/proc/net/tcp6", "/proc/net/tcp"} { // tcp last: 127.0.0.1 wins
		f, err := os.Open(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = parseListeners(f, out)
		_ = f.Close()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 2 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// tcpListen is the kernel's TCP_LISTEN state, as /proc/net/tcp writes it.
const tcpListen = "0A"

// parseListeners adds the loopback listeners of one /proc/net/tcp{,6}
// table to out.
func parseListeners(r io.Reader, out map[int]netip.Addr) error {
	sc := bufio.NewScanner(r)
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		host, port, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil || p == 0 {
			continue
		}
		a, ok := procAddr(host)
		if !ok || !a.IsLoopback() {
			continue
		}
		out[int(p)] = a
	}
	return sc.Err()
}

// procAddr decodes /proc/net/tcp's address: the bytes of each 32-bit word
// in the host's order (little-endian on every platform we build for).
func procAddr(h string) (netip.Addr, bool) {
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.Addr{}, false
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	a, _ := netip.AddrFromSlice(b)
	return a.Unmap(), true
}
