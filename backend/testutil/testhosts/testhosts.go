// Package testhosts makes test machines on this host for egress tests: a
// network namespace behind a veth, holding addresses of a private /24 and
// one TCP listener on all of them. Containers reach them through the host's
// forwarding, as they would machines of the operator's network; nothing
// leaves this machine. Everything is removed when the test ends.
package testhosts

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Start serves the hosts .2, .3, … (n of them) of prefix (a /24 this test
// alone uses), the host's side being .1. It returns their addresses and the
// port their listener accepts (and closes) connections on.
func Start(t testing.TB, prefix netip.Prefix, n int) (addrs []string, port int) {
	t.Helper()
	ns, addrs := Hosts(t, prefix, n)
	var ln net.Listener
	In(t, ns, func() (err error) {
		ln, err = (&net.ListenConfig{}).Listen(context.Background(), "tcp", "0.0.0.0:0")
		return err
	})
	return addrs, AcceptAll(t, ln)
}

// Hosts makes the hosts of Start with no listener: it returns the name of
// their network namespace (open servers there with In) and their
// addresses.
func Hosts(t testing.TB, prefix netip.Prefix, n int) (ns string, addrs []string) {
	t.Helper()
	if !prefix.Addr().Is4() || prefix.Bits() != 24 {
		t.Fatalf("testhosts: %s is not an IPv4 /24", prefix)
	}
	base := prefix.Masked().Addr().As4()
	at := func(i byte) string { b := base; b[3] = i; return netip.AddrFrom4(b).String() }
	tag := fmt.Sprintf("%04x", rand.IntN(1<<16))
	ns, host, peer := "dnth-"+tag, "dnthh"+tag, "dnthn"+tag
	t.Cleanup(func() {
		_ = exec.CommandContext(context.Background(), "ip", "netns", "del", ns).Run()
		_ = exec.CommandContext(context.Background(), "ip", "link", "del", host).Run()
	})
	cmds := [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
		{"addr", "add", at(1) + "/24", "dev", host},
		{"link", "set", host, "up"},
	}
	for i := 0; i < n; i++ {
		a := at(byte(2 + i))
		addrs = append(addrs, a)
		cmds = append(cmds, []string{"-n", ns, "addr", "add", a + "/24", "dev", peer})
	}
	cmds = append(cmds, []string{"-n", ns, "link", "set", peer, "up"}, []string{"-n", ns, "link", "set", "lo", "up"},
		[]string{"-n", ns, "route", "add", "default", "via", at(1)})
	for _, cmd := range cmds {
		if out, err := exec.CommandContext(context.Background(), "ip", cmd...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s (is %s used by another test?)", cmd, err, out, prefix)
		}
	}
	return ns, addrs
}

// AcceptAll accepts and closes connections on ln until the test ends (a
// test host that only has to be reachable), and returns ln's port.
func AcceptAll(t testing.TB, ln net.Listener) int {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// In runs open (which opens sockets: they keep the namespace) inside the
// network namespace ns of Hosts, on a thread of its own; the test fails
// with open's error.
func In(t testing.TB, ns string, open func() error) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	oerr := open()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		panic("testhosts: cannot return to the test's network namespace: " + err.Error()) // the thread must not be reused
	}
	if oerr != nil {
		t.Fatal(oerr)
	}
}
