package tasks

import (
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// toGroup translates an environment's compose project into the group its
// provider runs: compose-go's types stop here, the providers see only
// compute's. imgs are the services' images (none on a provider that starts
// templates).
func toGroup(t compute.GroupTarget, task *catalog.Task, p *types.Project, imgs map[string]*compute.Image) *compute.Group {
	g := &compute.Group{GroupTarget: t, Services: make(map[string]compute.GroupService, len(p.Services)),
		Expose: task.Expose, Runtime: task.Runtime, AllowOut: task.Network.AllowOut}
	for name, s := range p.Services {
		gs := toService(name, s)
		if img := imgs[name]; img != nil {
			gs.Image = img.Ref
		}
		gs.Template = task.E2BTemplates[name]
		g.Services[name] = gs
	}
	return g
}

// toService is one compose service as a group's service.
func toService(name string, s types.ServiceConfig) compute.GroupService {
	gs := compute.GroupService{
		Image:          s.Image,
		Hostname:       s.Hostname,
		DomainName:     s.DomainName,
		User:           s.User,
		WorkingDir:     s.WorkingDir,
		Labels:         s.Labels,
		Tty:            s.Tty,
		StdinOpen:      s.StdinOpen,
		StopSignal:     s.StopSignal,
		Init:           s.Init,
		ReadOnly:       s.ReadOnly,
		ExtraHosts:     s.ExtraHosts.AsList(":"),
		ShmSize:        int64(s.ShmSize),
		GroupAdd:       s.GroupAdd,
		DNS:            s.DNS,
		DNSSearch:      s.DNSSearch,
		DNSOptions:     s.DNSOpts,
		Tmpfs:          s.Tmpfs,
		CapAdd:         s.CapAdd,
		CapDrop:        s.CapDrop,
		MemReservation: int64(s.MemReservation),
		Limits:         ownLimits(s),
	}
	if len(s.DependsOn) > 0 {
		gs.DependsOn = make(map[string]compute.Condition, len(s.DependsOn))
		for dep, d := range s.DependsOn {
			gs.DependsOn[dep] = compute.Condition(d.Condition)
		}
	}
	if s.ContainerName != "" && s.ContainerName != name {
		gs.Aliases = append(gs.Aliases, s.ContainerName)
	}
	if n := s.Networks["default"]; n != nil {
		gs.Aliases = append(gs.Aliases, n.Aliases...)
	}
	for k, v := range s.Environment {
		if v == nil {
			continue // declared without a value and none to inherit
		}
		if gs.Env == nil {
			gs.Env = map[string]string{}
		}
		gs.Env[k] = *v
	}
	if s.Command != nil {
		gs.Command = []string(s.Command)
	}
	if s.Entrypoint != nil {
		gs.Entrypoint = []string(s.Entrypoint)
	}
	if s.StopGracePeriod != nil {
		d := time.Duration(*s.StopGracePeriod)
		gs.StopTimeout = &d
	}
	if hc := s.HealthCheck; hc != nil {
		h := &compute.Healthcheck{Test: []string(hc.Test)}
		if hc.Disable {
			h.Test = []string{"NONE"}
		}
		if hc.Interval != nil {
			h.Interval = time.Duration(*hc.Interval)
		}
		if hc.Timeout != nil {
			h.Timeout = time.Duration(*hc.Timeout)
		}
		if hc.StartPeriod != nil {
			h.StartPeriod = time.Duration(*hc.StartPeriod)
		}
		if hc.Retries != nil {
			h.Retries = int(*hc.Retries)
		}
		gs.Healthcheck = h
	}
	return gs
}

// ownLimits are the limits service s sets itself: mem_limit, cpus,
// pids_limit, else deploy.resources.limits (compose-go refuses the two
// forms when they disagree); zero where it sets none.
func ownLimits(s types.ServiceConfig) compute.GroupLimits {
	var dl types.Resource
	if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
		dl = *s.Deploy.Resources.Limits
	}
	var l compute.GroupLimits
	l.MemoryBytes = firstPositive(int64(s.MemLimit), int64(dl.MemoryBytes))
	if c := max(s.CPUS, float32(dl.NanoCPUs)); c > 0 {
		l.NanoCPUs = int64(float64(c) * 1e9)
	}
	l.Pids = firstPositive(s.PidsLimit, dl.Pids)
	return l
}

// serviceLimits are the limits service s runs with: its own, else def for
// each one it leaves unset (what the provider applies).
func serviceLimits(s types.ServiceConfig, def compute.GroupLimits) compute.GroupLimits {
	return ownLimits(s).Or(def, int64(s.MemReservation))
}

func firstPositive(vs ...int64) int64 {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}
