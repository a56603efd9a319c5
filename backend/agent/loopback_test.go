package agent

import (
	"bufio"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A /proc/net/tcp table and a tcp6 one as the kernel writes them.
const procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0C8A 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F91 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
   3: 0200110A:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 100 0 0 10 0
`

const procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1388 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:1389 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:138A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7 1 0000000000000000 100 0 0 10 0
`

// Only listeners bound to loopback are taken: a wildcard or an interface
// address is reachable already, and a connection (not LISTEN) is no server.
func TestParseListenersTakesLoopbackOnly(t *testing.T) {
	got := map[int]netip.Addr{}
	for _, table := range []string{procTCP6, procTCP} {
		if err := parseListeners(strings.NewReader(table), got); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int]netip.Addr{
		3210: netip.MustParseAddr("127.0.0.1"),
		5000: netip.MustParseAddr("::1"),
		5002: netip.MustParseAddr("127.0.0.1"), // ::ffff:127.0.0.1
	}
	if len(got) != len(want) {
		t.Fatalf("listeners %v, want %v", got, want)
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("port %d: %v, want %v", p, got[p], a)
		}
	}
}

// The scan of this machine's table finds a listener the test opens on
// 127.0.0.1 (reading /proc only).
func TestScanLoopbackListenersFindsOne(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	got, err := ScanLoopbackListeners()
	if err != nil {
		t.Fatal(err)
	}
	if got[port] != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("port %d not found as a 127.0.0.1 listener: %v", port, got)
	}
}

// A server on 127.0.0.1 becomes reachable on the exposed address (here
// 127.0.0.2, standing for the sandbox's interface), both ways, and stops
// being so once it stops listening.
func TestLoopbackForwarderExposesAndWithdraws(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("echo " + line))
			}()
		}
	}()
	open := true
	f := &LoopbackForwarder{
		Scan: func() (map[int]netip.Addr, error) {
			all, err := ScanLoopbackListeners()
			if err != nil {
				return nil, err
			}
			out := map[int]netip.Addr{}
			if a, ok := all[port]; ok && open { // this test's listener only
				out[port] = a
			}
			return out, nil
		},
		Addrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil },
	}
	exposed := net.JoinHostPort("127.0.0.2", strconv.Itoa(port))
	f.Sync() // binds before it returns
	c, err := net.DialTimeout("tcp", exposed, 5*time.Second)
	if err != nil {
		t.Fatalf("%s does not answer: %v", exposed, err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte("hi\n"))
	got, rerr := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if got != "echo hi\n" {
		t.Fatalf("through the forward: %q (%v), want %q", got, rerr, "echo hi\n")
	}

	_ = srv.Close()
	open = false
	f.Sync()
	if c, err := net.DialTimeout("tcp", exposed, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts after the loopback server went away", exposed)
	}
}
