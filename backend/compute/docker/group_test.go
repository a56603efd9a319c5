package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
)

// newTestGroups is Groups of an owner of their own, on a test provider
// (newProvider: the agent, this binary's seed) of cfg; whatever the test
// leaves is removed when it ends. Their builds have no network, and their
// services no disk cap unless cfg sets one.
func newTestGroups(t *testing.T, cfg Config) *Groups {
	t.Helper()
	if cfg.DiskLimitMB == 0 {
		cfg.DiskLimitMB = -1
	}
	g, err := newProvider(t, cfg).Groups(GroupConfig{Owner: "test-groups-" + randomHex(4), BuildNetwork: noBuildNetwork})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.RemoveAll(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		_ = g.Close()
	})
	return g
}

// noBuildNetwork runs build steps on no network at all.
func noBuildNetwork(context.Context) (string, error) { return "none", nil }

func baseService() compute.GroupService {
	return compute.GroupService{Image: DefaultBaseImage, Command: []string{"sleep", "infinity"}}
}

// Groups on Docker keep every promise of the group capability.
func TestGroupSuiteOnDocker(t *testing.T) {
	t.Parallel()
	g := newTestGroups(t, Config{})
	id := "gs" + randomHex(4)
	computetest.GroupSuite(t, g, &compute.Group{GroupTarget: compute.GroupTarget{ID: id, RecordID: "rec-" + id, OrgID: "org1", TaskRef: "org1/demo@1"},
		Services: map[string]compute.GroupService{"web": baseService(), "attacker": baseService()},
		Expose:   map[string]int{"web": 8080}}, "attacker")
}

// A service waits for its dependency to be healthy, and reaches it (and
// its alias) by name on the group's own network.
func TestGroupDependencyOrderOnDocker(t *testing.T) {
	t.Parallel()
	g, ctx, id := groupTest(t, "go")
	db := baseService()
	db.Command = []string{"sh", "-c", "sleep 2; touch /tmp/ready; exec sleep infinity"}
	db.Healthcheck = &compute.Healthcheck{Test: []string{"CMD", "test", "-f", "/tmp/ready"}, Interval: 200 * time.Millisecond, Retries: 100}
	db.Aliases = []string{"database"}
	web := baseService()
	web.DependsOn = map[string]compute.Condition{"db": compute.ConditionHealthy, "not-in-the-group": compute.ConditionStarted}
	grp := &compute.Group{GroupTarget: compute.GroupTarget{ID: id, RecordID: "rec-" + id, OrgID: "org1", TaskRef: "org1/demo@1"},
		Services: map[string]compute.GroupService{"web": web, "db": db}}
	res, err := g.Bring(ctx, grp)
	if err != nil {
		t.Fatal(err)
	}
	cli := g.Client()
	dbState, err := cli.ContainerInspect(ctx, res.Containers["db"])
	if err != nil {
		t.Fatal(err)
	}
	webState, err := cli.ContainerInspect(ctx, res.Containers["web"])
	if err != nil {
		t.Fatal(err)
	}
	var healthy time.Time
	for _, l := range dbState.State.Health.Log {
		if l.ExitCode == 0 {
			healthy = l.End
			break
		}
	}
	webStarted, _ := time.Parse(time.RFC3339Nano, webState.State.StartedAt)
	if healthy.IsZero() || webStarted.Before(healthy) {
		t.Fatalf("web started at %s, db first healthy at %s", webStarted, healthy)
	}
	for _, name := range []string{"db", "database"} {
		r, err := g.Exec(ctx, id, "web", []string{"getent", "hosts", name}, 20*time.Second, 1<<20)
		if err != nil || r.ExitCode != 0 || !strings.Contains(string(r.Output), ".") {
			t.Fatalf("web resolving %s: %+v %v", name, r, err)
		}
	}
	if res.Containers["web"] == "" || len(res.OneShots) != 0 {
		t.Fatalf("result %+v", res)
	}
}

// A service that exits before the group is ready fails Bring with its
// logs; a deadline names the service that was not ready.
func TestGroupFailuresOnDocker(t *testing.T) {
	t.Parallel()
	g, ctx, id := groupTest(t, "gf")
	bad := baseService()
	bad.Command = []string{"sh", "-c", "echo dying; exit 3"}
	// Not ready before its first check: it dies while Bring waits.
	bad.Healthcheck = &compute.Healthcheck{Test: []string{"CMD", "true"}, Interval: 30 * time.Second, StartPeriod: 30 * time.Second}
	_, err := g.Bring(ctx, &compute.Group{GroupTarget: compute.GroupTarget{ID: id}, Services: map[string]compute.GroupService{"bad": bad}})
	var se *compute.ServiceError
	if !errors.As(err, &se) || se.Service != "bad" || !strings.Contains(se.Msg, "code 3") || !strings.Contains(err.Error(), "dying") {
		t.Fatalf("a dying service: %v", err)
	}
	slow := baseService()
	slow.Healthcheck = &compute.Healthcheck{Test: []string{"CMD", "false"}, Interval: 10 * time.Second, Retries: 100}
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	_, err = g.Bring(short, &compute.Group{GroupTarget: compute.GroupTarget{ID: id + "s"}, Services: map[string]compute.GroupService{"slow": slow}})
	var de *compute.DeadlineError
	if !errors.As(err, &de) || de.Service != "slow" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline: %v", err)
	}
}

// Groups made from a Provider share its Docker client and leave it open,
// and share its agent (whose volume is filled once for both).
func TestProviderGroupsShareTheClient(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Network: testNetwork, AgentBinary: agentbin.Path(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	g, err := p.Groups(GroupConfig{Owner: "test-groups-" + randomHex(4)})
	if err != nil {
		t.Fatal(err)
	}
	if g.Client() != p.cli {
		t.Fatal("the groups have a client of their own")
	}
	if g.agent != p.agent || g.agentHTTP != p.agentHTTP {
		t.Fatal("the groups have an agent of their own")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// A forked service (From: a checkpoint) with a health check is ready once
// its exposed port accepts a connection, without waiting for the engine's
// first check (here 30 s away); one whose port never listens is not, and
// a service that is not a fork still waits for its check.
func TestGroupForkReadyOnItsPort(t *testing.T) {
	t.Parallel()
	g, ctx, id := groupTest(t, "fp")
	svc := func(listen bool) compute.GroupService {
		s := baseService()
		s.From = DefaultBaseImage
		s.Command = []string{"sh", "-c", "exec sleep infinity"}
		if listen {
			s.Command = []string{"python3", "-m", "http.server", "8080"}
		}
		s.Healthcheck = &compute.Healthcheck{Test: []string{"CMD", "false"}, Interval: 30 * time.Second, StartPeriod: 30 * time.Second}
		return s
	}
	group := func(id string, s compute.GroupService) *compute.Group {
		return &compute.Group{GroupTarget: compute.GroupTarget{ID: id, RecordID: "rec-" + id, OrgID: "org1", TaskRef: "org1/demo@1"},
			Services: map[string]compute.GroupService{"web": s}, Expose: map[string]int{"web": 8080}}
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := g.Bring(short, group(id, svc(true))); err != nil {
		t.Fatalf("a forked service listening on its port: %v", err)
	}
	for name, s := range map[string]compute.GroupService{"silent": svc(false), "created": func() compute.GroupService {
		s := svc(true)
		s.From = ""
		return s
	}()} {
		short, cancel := context.WithTimeout(ctx, 8*time.Second)
		_, err := g.Bring(short, group(id+name[:1], s))
		cancel()
		var de *compute.DeadlineError
		if !errors.As(err, &de) || de.Service != "web" {
			t.Fatalf("%s: want the deadline naming web, got %v", name, err)
		}
	}
}
