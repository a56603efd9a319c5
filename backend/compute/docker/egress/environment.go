package egress

import (
	"context"
	"net/netip"
)

// AttachEnvironment puts a task environment's bridge under the baseline
// and the task's own policy: its services reach each other (traffic
// staying on the bridge) and, beyond it, only allow (the task's declared
// allowOut, still under the baseline: link-local, the host and the private
// ranges the operator did not allow stay dropped). Everything else leaving
// the bridge is dropped and counted as policy. An environment declaring
// nothing resolves no external name either (the engine's DNS forwarding is
// dropped like any other packet). Idempotent: the chain is rewritten whole
// in one transaction, so a restart re-applies the manifest's current list.
func (f *Firewall) AttachEnvironment(ctx context.Context, bridge string, allow []netip.Prefix) error {
	if allow == nil {
		allow = []netip.Prefix{}
	}
	return f.attachNetwork(ctx, bridge, false, &allow)
}

// environmentRules ends an environment bridge's chain: allow, then drop.
func environmentRules(allow []netip.Prefix, rule func(string, ...any), drop func(match, reason string)) {
	a4, a6 := split(allow)
	if len(a4) > 0 {
		rule("ip daddr { %s } accept", join(a4))
	}
	if len(a6) > 0 {
		rule("ip6 daddr { %s } accept", join(a6))
	}
	drop("", ReasonPolicy)
}
