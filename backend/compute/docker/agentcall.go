package docker

import (
	"context"
	"errors"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
)

// errMoved: the container's agent is no longer where the cache said.
var errMoved = errors.New("the sandbox agent's address changed")

// agentCall runs call with a client of ref's agent. The first call to a
// sandbox inspects it first (agentClient). Later ones start call at once at
// the address the cache holds and inspect beside it: an exec's first byte
// no longer waits for the engine. The inspect still guards the call: a
// paused sandbox (whose agent, frozen, would hold the call) or a stopped
// one ends it with KindConflict as soon as the engine says so, as before.
// An address that changed (a container restarted) is retried at the new
// one: at the old one nothing ran, since no other agent takes this
// sandbox's token.
func (p *Provider) agentCall(ctx context.Context, op string, ref compute.Ref, call func(context.Context, *envd.Client) error) error {
	cached, ok := p.envds.get(ref.ID)
	if !ok {
		c, err := p.agentClient(ctx, op, ref)
		if err != nil {
			return err
		}
		return call(ctx, c)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	checked := make(chan error, 1)
	go func() {
		c, err := p.agentClient(cctx, op, ref)
		if err == nil && (c.URL != cached.url || c.Token != cached.token) {
			err = errMoved
		}
		if err != nil && cctx.Err() == nil {
			cancel(err)
		}
		checked <- err
	}()
	err := call(cctx, p.agentAt(ref, cached))
	if err == nil || ctx.Err() != nil {
		return err
	}
	// Failed: what the engine says decides (a refused connection at a
	// stale address, a sandbox paused or stopped under the call).
	cerr := <-checked
	switch {
	case cerr == nil || errors.Is(cerr, context.Canceled):
		return err
	case errors.Is(cerr, errMoved):
		c, aerr := p.agentClient(ctx, op, ref)
		if aerr != nil {
			return aerr
		}
		return call(ctx, c)
	default:
		return cerr // paused, stopped, gone: what agentClient says
	}
}
