package docker

import (
	"context"
	"net"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// agentReachTimeout bounds how long a call waits to connect to an agent
// that does not answer. The agents listen on this host's bridges, where a
// connection is up in well under a millisecond; one that is not up within
// a second is not refused but lost (a stale neighbour entry, see
// neighbour.go, or a machine so loaded that a SYN was dropped), so it is
// tried again rather than failed, after its neighbour entry is dropped.
const agentReachTimeout = 20 * time.Second

// dialAgent connects to an agent at addr ("ip:port"). Each attempt has a
// deadline of its own (1 s, doubling to 5 s); after a failed one the host's
// neighbour entry for the address is dropped, so the next attempt asks the
// bridge afresh who holds it. Nothing has been sent on a connection that
// was never made, so every call (an upload's body, a command's start)
// is safe to send on the one that is. A refused connection (an agent that
// restarts) is retried alike, a few milliseconds apart. The caller's
// context ends it at once; past agentReachTimeout the last dial error is
// returned (the envd client makes it a 503 naming the sandbox).
func dialAgent(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	d.KeepAlive = 30 * time.Second
	attempt := time.Second
	return backoff.Retry(ctx, func() (net.Conn, error) {
		actx, cancel := context.WithTimeout(ctx, attempt)
		defer cancel()
		attempt = min(2*attempt, 5*time.Second)
		conn, err := d.DialContext(actx, network, addr)
		if err == nil || ctx.Err() != nil {
			return conn, backoff.Permanent(err)
		}
		if host, _, serr := net.SplitHostPort(addr); serr == nil {
			forgetNeighbour(host)
		}
		return nil, err
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 10 * time.Millisecond, Multiplier: 2, MaxInterval: 500 * time.Millisecond}),
		backoff.WithMaxElapsedTime(agentReachTimeout))
}
