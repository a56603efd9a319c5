package main

// The DNS forwarder beside a flooding neighbour (issue 34, item 2): each
// sandbox is served within bounds of its own (query slots, TCP
// connections, resolved addresses), so one sandbox flooding the forwarder
// with queries an upstream never answers slows no other. A quiet sandbox's
// allowed name is timed alone and then beside the flood, on the real
// forwarder and the real nft (in a network namespace of the bench's own),
// against a resolver of the bench's own on 127.0.0.1.

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
)

var (
	dnsQueries  = flag.Int("dns-queries", 2000, "queries of the quiet sandbox in each phase of the DNS part")
	dnsFloodQPS = flag.Int("dns-flood-qps", 5000, "queries per second the flooding sandbox sends (to a name its upstream never answers)")
)

func dnsPart() {
	fw, releaseNS := nsFirewall("dnd-")
	defer releaseNS()
	up, release := benchResolver()
	defer release()
	d := egress.NewForwarder(fw, []netip.AddrPort{up})
	defer d.Close()
	quiet := serveBenchDNS(d, egress.Client{MAC: "02:00:00:00:0d:01", Names: []string{"quiet.bench"}, DenyAll: true})
	noisy := serveBenchDNS(d, egress.Client{MAC: "02:00:00:00:0d:02", Names: []string{"flood.bench"}, DenyAll: true})

	ask := func() []time.Duration {
		out := make([]time.Duration, 0, *dnsQueries)
		q := new(dns.Msg)
		q.SetQuestion("quiet.bench.", dns.TypeA)
		cl := &dns.Client{Timeout: 5 * time.Second}
		for range *dnsQueries {
			t0 := time.Now()
			r, _, err := cl.Exchange(q, quiet.String())
			if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				fail(fmt.Errorf("dns: the quiet sandbox's allowed name: %v %v", r, err))
			}
			out = append(out, time.Since(t0))
		}
		return out
	}
	ask() // the first answer opens the address (an nft run); the later ones renew nothing
	alone := ask()

	conn, err := (&net.Dialer{}).DialContext(context.Background(), "udp", noisy.String())
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	var sent, servfail atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	floodStart := time.Now()
	go func() { // the flood: paced to -dns-flood-qps (caught up each 1 ms tick)
		defer wg.Done()
		q := new(dns.Msg)
		q.SetQuestion("flood.bench.", dns.TypeA)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			due := int64(time.Since(floodStart).Seconds() * float64(*dnsFloodQPS))
			for sent.Load() < due {
				q.Id = uint16(sent.Add(1))
				b, _ := q.Pack()
				_, _ = conn.Write(b)
			}
		}
	}()
	go func() { // its answers: SERVFAIL once its slots are taken
		defer wg.Done()
		buf := make([]byte, 512)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			var m dns.Msg
			if m.Unpack(buf[:n]) == nil && m.Rcode == dns.RcodeServerFailure {
				servfail.Add(1)
			}
		}
	}()
	time.Sleep(500 * time.Millisecond) // let the flood take the neighbour's slots (a warm-up, not synchronisation)
	beside := ask()
	elapsed := time.Since(floodStart)
	close(stop)
	_ = conn.Close()
	wg.Wait()
	fmt.Printf("%-28s allowed name alone: p50 %.2f ms p99 %.2f ms; beside a sandbox flooding %d q/s (%.0f q/s sent, %d answered SERVFAIL): p50 %.2f ms p99 %.2f ms (target p99 ≤ 5 ms; %d queries each)\n",
		"DNS forwarder", ms(pct(alone, 50)), ms(pct(alone, 99)), *dnsFloodQPS, float64(sent.Load())/elapsed.Seconds(), servfail.Load(),
		ms(pct(beside, 50)), ms(pct(beside, 99)), *dnsQueries)
}

// benchResolver answers quiet.bench. at once and never answers
// flood.bench. (until release): a stuck upstream holds the flooder's
// slots for the forwarder's whole timeout.
func benchResolver() (netip.AddrPort, func()) {
	pc, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	stuck := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		if q.Question[0].Name == "flood.bench." {
			<-stuck
			return
		}
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A: net.ParseIP("192.0.2.10")})
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	return netip.MustParseAddrPort(pc.LocalAddr().String()), func() { close(stuck); _ = srv.Shutdown() }
}

// serveBenchDNS serves c on a free loopback port of the bench's own
// network namespace: /proc/thread-self's, not /proc/self's. The latter is
// the main thread's, and the main thread may be parked in a sandbox's
// namespace for good: listenIn's locked goroutine ends without unlocking,
// and when it ran on the main thread, Go wedges that thread instead of
// ending it (a bench run's egress part did; dns then served in a deleted
// sandbox's namespace and its queries were refused).
func serveBenchDNS(d *egress.Forwarder, c egress.Client) netip.AddrPort {
	for attempt := 0; ; attempt++ {
		pc, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		addr := netip.MustParseAddrPort(pc.LocalAddr().String())
		_ = pc.Close()
		if err = d.ServeIn(c.MAC, "/proc/thread-self/ns/net", addr, c); err == nil {
			return addr
		}
		if attempt == 20 {
			fail(err)
		}
	}
}
