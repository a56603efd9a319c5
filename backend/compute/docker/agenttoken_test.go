package docker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// assertTokenHidden fails unless token, container id's agent token, is in
// none of what `docker ps` and `docker inspect` show (labels, environment,
// entrypoint, command, anywhere in inspect's JSON).
func assertTokenHidden(ctx context.Context, t *testing.T, cli *client.Client, id, token string) {
	t.Helper()
	if !strings.ContainsFunc(token, func(r rune) bool { return r != '0' }) || len(token) < 32 {
		t.Fatalf("container %s: agent token %q", id, token)
	}
	c, raw, err := cli.ContainerInspectWithRaw(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), token) {
		t.Errorf("docker inspect shows the agent's token")
	}
	for k, v := range c.Config.Labels {
		if strings.Contains(v, token) {
			t.Errorf("label %s holds the agent's token", k)
		}
	}
	for _, kv := range c.Config.Env {
		if strings.Contains(kv, token) {
			t.Errorf("variable %s holds the agent's token", strings.SplitN(kv, "=", 2)[0])
		}
	}
	if slices.ContainsFunc(append(slices.Clone(c.Config.Entrypoint), c.Config.Cmd...), func(a string) bool { return strings.Contains(a, token) }) {
		t.Errorf("the command line %q holds the agent's token", append(c.Config.Entrypoint, c.Config.Cmd...))
	}
	ps, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("id", id))})
	if err != nil || len(ps) != 1 {
		t.Fatalf("docker ps of %s: %d %v", id, len(ps), err)
	}
	for k, v := range ps[0].Labels {
		if strings.Contains(v, token) {
			t.Errorf("docker ps shows label %s holding the agent's token", k)
		}
	}
}

// The agent's token is in nothing `docker ps` or `docker inspect` shows;
// a backend of the same deployment that never saw the sandbox (restarted,
// another replica) still reaches its agent, and one of another
// deployment (another seed) does not.
func TestAgentTokenNotShownByEngine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed := "seed-" + randomHex(16)
	p := newProvider(t, Config{AgentTokenSeed: seed})
	inst := mustCreate(t, p, testSpec())
	c, err := p.cli.ContainerInspect(ctx, inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	assertTokenHidden(ctx, t, p.cli, inst.Ref.ID, p.agentKey.tokenOf(c))

	fresh := newProvider(t, Config{AgentTokenSeed: seed}) // as after a restart: nothing cached
	res, err := fresh.Exec(ctx, compute.Ref{ID: inst.Ref.ID}, compute.ExecRequest{Cmd: []string{"echo", "reached"}})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "reached" {
		t.Fatalf("exec through a backend of the deployment that did not create the sandbox: %+v %v", res, err)
	}
	other := newProvider(t, Config{AgentTokenSeed: "another-deployment"})
	if _, err := other.Exec(ctx, compute.Ref{ID: inst.Ref.ID}, compute.ExecRequest{Cmd: []string{"true"}}); err == nil {
		t.Fatal("a backend with another seed reached the agent")
	}
}

// A task service's token is hidden alike (also with a read-only root),
// and another backend of the same deployment reaches its agent.
func TestServiceAgentTokenHidden(t *testing.T) {
	t.Parallel()
	seed := "seed-" + randomHex(16)
	g, ctx, id := groupTest(t, "tk")
	g.agentKey = newTokenKey(seed)
	res := bringGroup(ctx, t, g, id, map[string]compute.GroupService{"app": {Image: DefaultBaseImage, ReadOnly: true,
		Command: []string{"sleep", "infinity"}}})
	c, err := g.cli.ContainerInspect(ctx, res.Containers["app"])
	if err != nil {
		t.Fatal(err)
	}
	assertTokenHidden(ctx, t, g.cli, c.ID, g.agentKey.tokenOf(c))
	fresh, err := newProvider(t, Config{AgentTokenSeed: seed}).Groups(GroupConfig{Owner: g.owner})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	r, err := fresh.Exec(ctx, id, "app", []string{"sh", "-c", "exit 5"}, 20*time.Second, 1<<20)
	if err != nil || r.ExitCode != 5 {
		t.Fatalf("exec through a backend that did not start the service: %+v %v", r, err)
	}
}
