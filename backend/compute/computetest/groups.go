package computetest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Member states of the Groups fake (Docker's container states).
const (
	memberRunning = "running"
	memberPaused  = "paused"
	memberExited  = "exited"
)

// Groups is an in-memory compute.GroupProvider for unit tests of the code
// that drives groups (task environments): a group is a map of members, a
// Bring starts them in dependency order (recorded by Started), failures are
// set by the test (RemoveHold makes it slow to remove), and no engine is
// involved. The zero
// value is not usable; call NewGroups.
type Groups struct {
	mu      sync.Mutex
	groups  map[string]map[string]*groupMember // group id -> service -> member
	built   map[string]bool                    // image refs
	builds  int64
	started []string // "group/service" in start order
	errs    map[string]error
	calls   map[string]int
	logs    map[string][]string // member id -> lines
	seq     int
	builder bool
}

type groupMember struct {
	id      string
	service string
	state   string
	image   string
}

var _ compute.GroupProvider = (*Groups)(nil)

// NewGroups returns an empty fake; builder says whether it builds images
// (Docker) or starts templates (E2B).
func NewGroups(builder bool) *Groups {
	return &Groups{groups: map[string]map[string]*groupMember{}, built: map[string]bool{}, errs: map[string]error{},
		calls: map[string]int{}, logs: map[string][]string{}, builder: builder}
}

// Fail makes every later call of op ("bring", "build", "remove", "pause",
// "unpause", "exec", "snapshot", "ping") return err; nil clears it.
func (g *Groups) Fail(op string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		delete(g.errs, op)
		return
	}
	g.errs[op] = err
}

// Calls is how many times op was called.
func (g *Groups) Calls(op string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[op]
}

// Started lists "group/service" in the order the members were started.
func (g *Groups) Started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.started)
}

// Members returns service -> state of group id (nil when it has none).
func (g *Groups) Members(id string) map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.groups[id]) == 0 {
		return nil
	}
	out := map[string]string{}
	for svc, m := range g.groups[id] {
		out[svc] = m.state
	}
	return out
}

// Exit marks service of group id exited (it died), with log lines.
func (g *Groups) Exit(id, service string, logs ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.groups[id][service]; m != nil {
		m.state = memberExited
		g.logs[m.id] = logs
	}
}

func (g *Groups) begin(op string) error {
	g.calls[op]++
	return g.errs[op]
}

// BuildsImages implements compute.GroupProvider.
func (g *Groups) BuildsImages() bool { return g.builder }

// Missing implements compute.GroupProvider: the images not built yet.
func (g *Groups) Missing(_ context.Context, imgs map[string]*compute.Image) ([]*compute.Image, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*compute.Image
	for _, img := range imgs {
		if !g.built[img.Ref] {
			out = append(out, img)
		}
	}
	slices.SortFunc(out, func(a, b *compute.Image) int { return strings.Compare(a.Service, b.Service) })
	return out, nil
}

// Build implements compute.GroupProvider: an image without a build must be
// present (built earlier).
func (g *Groups) Build(ctx context.Context, imgs map[string]*compute.Image) (int, error) {
	missing, _ := g.Missing(ctx, imgs)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin("build"); err != nil {
		return 0, err
	}
	n := 0
	for _, img := range missing {
		if !img.Build {
			return n, &compute.BuildError{Service: img.Service, Msg: fmt.Sprintf("image %q is not present", img.Ref)}
		}
		g.built[img.Ref] = true
		g.builds++
		n++
	}
	return n, nil
}

// Builds implements compute.GroupProvider.
func (g *Groups) Builds() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.builds
}

// Bring implements compute.GroupProvider: members already running are
// adopted, the others started once their dependencies are (a cycle or a
// service without an image fails).
func (g *Groups) Bring(ctx context.Context, grp *compute.Group) (*compute.GroupResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin("bring"); err != nil {
		return nil, err
	}
	members := g.groups[grp.ID]
	if members == nil {
		members = map[string]*groupMember{}
		g.groups[grp.ID] = members
	}
	res := &compute.GroupResult{Endpoints: map[string]compute.Endpoint{}, Containers: map[string]string{}}
	oneShots := grp.OneShots()
	for svc := range oneShots {
		res.OneShots = append(res.OneShots, svc)
	}
	slices.Sort(res.OneShots)
	for svc, m := range members {
		s, ok := grp.Services[svc]
		if ok && m.image == s.Image && m.state != memberExited {
			m.state = memberRunning
			res.Adopted++
			continue
		}
		delete(members, svc)
	}
	names := make([]string, 0, len(grp.Services))
	for n := range grp.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	for len(names) > 0 {
		var next []string
		for _, n := range names {
			if members[n] != nil {
				continue
			}
			ready := true
			for dep := range grp.Services[n].DependsOn {
				if _, in := grp.Services[dep]; in && members[dep] == nil {
					ready = false
				}
			}
			if !ready {
				next = append(next, n)
				continue
			}
			s := grp.Services[n]
			if (g.builder && s.Image == "") || (!g.builder && s.Template == "") {
				return nil, &compute.BuildError{Service: n, Msg: "has no image or template"}
			}
			g.seq++
			members[n] = &groupMember{id: "m" + strconv.Itoa(g.seq), service: n, state: memberRunning, image: s.Image}
			g.started = append(g.started, grp.ID+"/"+n)
		}
		if len(next) == len(names) {
			return nil, &compute.ServiceError{Service: next[0], Msg: "was never started (its dependencies never became ready)"}
		}
		names = next
	}
	for n, m := range members {
		res.Containers[n] = m.id
		if port, ok := grp.Expose[n]; ok {
			host := n + "." + grp.ID + ".fake"
			res.Endpoints[n] = compute.Endpoint{Host: host, Port: port, URL: "http://" + host + ":" + strconv.Itoa(port)}
		}
	}
	return res, nil
}

// Remove implements compute.GroupProvider.
func (g *Groups) Remove(ctx context.Context, id string) error {
	_, err := g.RemoveCount(ctx, id)
	return err
}

// RemoveCount implements compute.GroupProvider (RemoveHold makes it slow).
func (g *Groups) RemoveCount(ctx context.Context, id string) (int, error) {
	g.mu.Lock()
	err := g.begin("remove")
	g.mu.Unlock()
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.groups[id])
	if _, ok := g.groups[id]; ok {
		n++ // the network
	}
	delete(g.groups, id)
	return n, nil
}

// Pause implements compute.GroupProvider.
func (g *Groups) Pause(_ context.Context, id string) error {
	return g.setAll("pause", id, memberRunning, memberPaused)
}

// Unpause implements compute.GroupProvider.
func (g *Groups) Unpause(_ context.Context, id string) error {
	return g.setAll("unpause", id, memberPaused, memberRunning)
}

func (g *Groups) setAll(op, id, from, to string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin(op); err != nil {
		return &compute.ProviderError{Provider: "fake", Op: op + " group " + id, Err: err}
	}
	for _, m := range g.groups[id] {
		if m.state == from {
			m.state = to
		}
	}
	return nil
}

// Exec implements compute.GroupProvider: "echo ARGS" writes ARGS and a
// newline, any other command its argv likewise; "false" exits 1, "exit N" exits N,
// "sleep" outlives any budget.
func (g *Groups) Exec(ctx context.Context, id, service string, argv []string, timeout time.Duration, maxOutput int) (*compute.GroupExecResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin("exec"); err != nil {
		return nil, err
	}
	m := g.groups[id][service]
	if m == nil || m.state != memberRunning {
		return nil, fmt.Errorf("%w: service %q", compute.ErrNotRunning, service)
	}
	res := &compute.GroupExecResult{}
	switch {
	case len(argv) == 1 && argv[0] == "false":
		res.ExitCode = 1
	case len(argv) == 2 && argv[0] == "exit":
		res.ExitCode, _ = strconv.Atoi(argv[1])
	case len(argv) > 0 && argv[0] == "sleep":
		res.TimedOut, res.ExitCode, res.Duration = true, 124, timeout
	case len(argv) > 0 && argv[0] == "echo":
		res.Output = []byte(strings.Join(argv[1:], " ") + "\n")
	default:
		res.Output = []byte(strings.Join(argv, " ") + "\n")
	}
	if maxOutput >= 0 && len(res.Output) > maxOutput {
		res.Output, res.Truncated = res.Output[:maxOutput], true
	}
	return res, nil
}

// ExecStream implements compute.GroupProvider with Exec's command.
func (g *Groups) ExecStream(ctx context.Context, id, service string, argv []string, timeout time.Duration, emit compute.Emit) (*compute.GroupExecResult, error) {
	res, err := g.Exec(ctx, id, service, argv, timeout, 1<<20)
	if err != nil {
		return nil, err
	}
	evs := []compute.ProcessEvent{{Type: compute.EventStart, PID: 1}}
	if len(res.Output) > 0 {
		evs = append(evs, compute.ProcessEvent{Type: compute.EventStdout, Data: res.Output})
	}
	evs = append(evs, compute.ProcessEvent{Type: compute.EventExit, ExitCode: res.ExitCode})
	for _, ev := range evs {
		if err := emit(ev); err != nil {
			return nil, err
		}
	}
	res.Output = nil
	return res, nil
}

// Snapshot implements compute.GroupProvider.
func (g *Groups) Snapshot(context.Context) (*compute.GroupSnapshot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin("snapshot"); err != nil {
		return nil, err
	}
	s := &compute.GroupSnapshot{Containers: map[string][]compute.GroupMember{}, Networks: map[string][]string{}}
	for id, members := range g.groups {
		s.Networks[id] = []string{"net-" + id}
		for svc, m := range members {
			s.Containers[id] = append(s.Containers[id], compute.GroupMember{ID: m.id, Name: m.id, GroupID: id, Service: svc,
				State: m.state, Status: m.state, Image: m.image})
		}
	}
	return s, nil
}

// LastLogs implements compute.GroupProvider: the lines given to Exit.
func (g *Groups) LastLogs(_ context.Context, id string, n int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	lines := g.logs[id]
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return slices.Clone(lines)
}

// Ping implements compute.GroupProvider.
func (g *Groups) Ping(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.begin("ping")
}

// Negotiate implements compute.GroupProvider (nothing to negotiate).
func (g *Groups) Negotiate(context.Context) {}

// Watch implements compute.GroupProvider: the fake has no events.
func (g *Groups) Watch(context.Context) {}

// Close implements compute.GroupProvider.
func (g *Groups) Close() error { return nil }
