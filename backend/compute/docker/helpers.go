package docker

import (
	"context"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Helper containers are the deployment's (labelScope) but no record's: the
// route helper that cuts an isolated sandbox's default route (it shares
// the sandbox's network namespace) and the filler of the agent's volume.
// Each is removed by the backend that made it; one killed meanwhile left
// them for good, since List, and so the orphan sweep, shows sandboxes
// only. SweepHelpers removes them once their owner is gone.
const (
	labelHelper     = "dev.dreadnode.helper" // what the helper is for
	helperRoute     = "route"
	helperAgentFill = "agent-fill"
	// helperStale is how old a helper may be before it is taken for a
	// dead backend's leftover whatever its owner: a route helper runs
	// for seconds, a filler at most agentFillStale.
	helperStale = 10 * time.Minute
)

// SweepHelpers implements compute.HelperSweeper: it removes this
// deployment's helper containers whose owner is gone. A route helper's
// owner is the sandbox whose network namespace it joined (gone, or no
// longer running); a filler's is the backend filling the volume, taken
// for dead once the filler is older than agentFillStale (as ensureVolume
// does). Any helper older than helperStale goes too. A route helper made
// before the helper label existed is recognised by its network mode.
func (p *Provider) SweepHelpers(ctx context.Context) error {
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labelScope+"="+p.cfg.Scope))})
	if err != nil {
		return classify("list helpers", err)
	}
	for _, c := range cs {
		if c.Labels[compute.LabelManaged] != "" || c.Labels[compute.LabelGroup] != "" || c.Labels[labelPool] != "" {
			continue // a sandbox, a task service or a warm-pool container: not a helper
		}
		owner, joined := strings.CutPrefix(c.HostConfig.NetworkMode, "container:")
		kind := c.Labels[labelHelper]
		if kind == "" && joined {
			kind = helperRoute
		}
		age := time.Since(time.Unix(c.Created, 0))
		gone := age > helperStale
		switch kind {
		case helperRoute:
			gone = gone || !p.ownerRunning(ctx, owner)
		case helperAgentFill:
			gone = gone || age > agentFillStale
		default:
			continue
		}
		if gone {
			if err := removeContainer(ctx, p.cli, c.ID); err != nil {
				return classify("remove helper", err)
			}
		}
	}
	return nil
}

// ownerRunning reports whether the container id (a route helper's
// sandbox) exists and runs or is paused; an engine that cannot answer
// counts as running (the helper is kept until helperStale).
func (p *Provider) ownerRunning(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	c, err := p.cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return false
	}
	if err != nil || c.State == nil {
		return true
	}
	return c.State.Running || c.State.Paused
}
