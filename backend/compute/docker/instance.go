package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Get implements compute.Provider.
func (p *Provider) Get(ctx context.Context, ref compute.Ref) (compute.Instance, error) {
	inst, err := p.get(ctx, "get", ref.ID)
	p.commits.mask(&inst)
	return inst, err
}

func (p *Provider) get(ctx context.Context, op, id string) (compute.Instance, error) {
	c, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return compute.Instance{}, classify(op, err)
	}
	inst := fromInspect(c)
	if r := p.diskExitReason(ctx, c); r != "" {
		inst.ExitReason = r
	}
	return inst, nil
}

// List implements compute.Provider: every container labelled managed in this
// provider's scope (see the package doc), except unclaimed warm-pool containers (they belong to no record, so the orphan
// sweep must not see them) and task services (Groups own them). List answers from one list call, so CPUCount,
// MemoryMB, StartedAt and ExitReason are left empty; Get has them.
func (p *Provider) List(ctx context.Context) ([]compute.Instance, error) {
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: p.scopeFilter(),
	})
	if err != nil {
		return nil, classify("list", err)
	}
	drops := p.egressDrops(ctx)
	out := make([]compute.Instance, 0, len(cs))
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if strings.HasPrefix(name, poolPrefix) || c.Labels[compute.LabelGroup] != "" {
			continue // a task service carries the deployment's label too, but is its group's (group.go)
		}
		inst := compute.Instance{
			Ref:      compute.Ref{ID: c.ID},
			RecordID: recordID(name, c.Labels),
			OrgID:    c.Labels[compute.LabelOrg],
			Status:   status(c.State),
		}
		p.commits.mask(&inst)
		if inst.Status == compute.StatusExited {
			// Status reads like "Exited (3) 2 seconds ago".
			_, _ = fmt.Sscanf(c.Status, "Exited (%d)", &inst.ExitCode)
		}
		if c.NetworkSettings != nil {
			inst.Endpoints = endpoints(c.Labels, c.NetworkSettings.Networks)
			inst.EgressDrops = dropsOf(drops, c.NetworkSettings.Networks)
		}
		out = append(out, inst)
	}
	return out, nil
}

// fromInspect converts an inspect answer to an Instance.
func fromInspect(c container.InspectResponse) compute.Instance {
	var labels map[string]string
	if c.Config != nil {
		labels = c.Config.Labels
	}
	inst := compute.Instance{
		Ref:      compute.Ref{ID: c.ID},
		RecordID: recordID(strings.TrimPrefix(c.Name, "/"), labels),
		OrgID:    labels[compute.LabelOrg],
	}
	if st := c.State; st != nil {
		inst.Status = status(st.Status)
		inst.StartedAt, _ = time.Parse(time.RFC3339Nano, st.StartedAt)
		if inst.Status == compute.StatusExited {
			inst.ExitCode = st.ExitCode
			inst.ExitReason = exitReason(st)
		}
	}
	if hc := c.HostConfig; hc != nil {
		inst.CPUCount = int((hc.NanoCPUs + 5e8) / 1e9)
		inst.MemoryMB = int(hc.Memory >> 20)
	}
	if c.NetworkSettings != nil {
		inst.Endpoints = endpoints(labels, c.NetworkSettings.Networks)
	}
	return inst
}

// recordID reads the record id from the labels, or, for a claimed warm-pool
// container (created before its record existed), from its name dn-<RecordID>.
func recordID(name string, labels map[string]string) string {
	if id := labels[compute.LabelRecord]; id != "" {
		return id
	}
	if labels[labelPool] != "" && strings.HasPrefix(name, namePrefix) && !strings.HasPrefix(name, poolPrefix) {
		return strings.TrimPrefix(name, namePrefix)
	}
	return ""
}

func status(s string) compute.Status {
	switch s {
	case "running", "restarting":
		return compute.StatusRunning
	case "paused":
		return compute.StatusPaused
	case "created":
		return compute.StatusCreated
	}
	return compute.StatusExited // exited, dead, removing
}

func exitReason(st *container.State) string {
	switch {
	case st.OOMKilled:
		return "out of memory (OOMKilled)"
	case st.Error != "":
		return st.Error
	case st.ExitCode == 137:
		// SIGKILL. On cgroup v2 the engine can lose the OOM event when the
		// cgroup is removed before containerd reads memory.events, leaving
		// OOMKilled false; a memory limit is then the usual cause, so say so.
		return "main process killed by signal 9 (exit code 137): out of memory if it reached memoryMB, or killed from outside"
	case st.ExitCode > 128 && st.ExitCode < 160:
		return fmt.Sprintf("main process killed by signal %d (exit code %d)", st.ExitCode-128, st.ExitCode)
	}
	return fmt.Sprintf("main process exited with code %d", st.ExitCode)
}

// scopeFilter selects the managed containers of this deployment.
func (p *Provider) scopeFilter() filters.Args {
	return filters.NewArgs(
		filters.Arg("label", compute.LabelManaged+"=true"),
		filters.Arg("label", labelScope+"="+p.cfg.Scope),
	)
}
