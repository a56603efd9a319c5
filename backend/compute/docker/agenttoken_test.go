package docker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
)

// assertTokenHidden fails unless container id's agent token is in none of
// what `docker ps` and `docker inspect` show (labels, environment,
// entrypoint, command), and is a root-only-readable file.
func assertTokenHidden(ctx context.Context, t *testing.T, cli *client.Client, id string) {
	t.Helper()
	token, err := readAgentToken(ctx, cli, id)
	if err != nil {
		t.Fatalf("reading the agent's token back: %v", err)
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
	st, err := cli.ContainerStatPath(ctx, id, agentTokenPath)
	if err != nil || st.Mode.Perm() != 0o400 {
		t.Errorf("token file %s: mode %v %v, want 0400", agentTokenPath, st.Mode, err)
	}
}

// The agent's token is in nothing `docker ps` or `docker inspect` shows,
// and a backend that never saw the sandbox (restarted, another replica)
// still reaches its agent: it reads the token back from the container.
func TestAgentTokenNotShownByEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	assertTokenHidden(ctx, t, p.cli, inst.Ref.ID)

	// As after a restart: a new provider of the same deployment, no cache.
	fresh := newProvider(t, Config{})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := fresh.Exec(ctx, compute.Ref{ID: inst.Ref.ID}, compute.ExecRequest{Cmd: []string{"echo", "reached"}})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "reached" {
		t.Fatalf("exec through a backend that did not create the sandbox: %+v %v", res, err)
	}
	if _, token, err := fresh.Envd(ctx, compute.Ref{ID: inst.Ref.ID}); err != nil || !agentTokenPattern.MatchString(token) {
		t.Fatalf("envd of a sandbox this backend did not create: %q %v", token, err)
	}
}

// A token file the sandbox rewrote is refused (not sent anywhere), with
// an error that says so.
func TestAgentTokenReplacedInsideIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	for _, replace := range []string{"head -c 100000 /dev/zero > " + agentTokenPath, "rm " + agentTokenPath + " && mkfifo " + agentTokenPath} {
		res, err := p.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"sh", "-c", replace}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %+v %v", replace, res, err)
		}
		if _, err := readAgentToken(ctx, p.cli, inst.Ref.ID); !errors.Is(err, errReplacedToken) {
			t.Errorf("after %s: read back %v, want errReplacedToken", replace, err)
		}
	}
}

// A task service's token is hidden alike, also where its root filesystem
// is read-only (the token is then in an anonymous volume), and another
// backend of the same owner reaches its agent.
func TestServiceAgentTokenHiddenOnReadOnlyRoot(t *testing.T) {
	t.Parallel()
	g, ctx, id := groupTest(t, "tk")
	res := bringGroup(ctx, t, g, id, map[string]compute.GroupService{"app": {Image: DefaultBaseImage, ReadOnly: true,
		Command: []string{"sleep", "infinity"}}})
	assertTokenHidden(ctx, t, g.cli, res.Containers["app"])
	fresh, err := NewGroups(GroupConfig{Owner: g.owner, AgentBinary: agentbin.Path(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	r, err := fresh.Exec(ctx, id, "app", []string{"sh", "-c", "exit 5"}, 20*time.Second, 1<<20)
	if err != nil || r.ExitCode != 5 {
		t.Fatalf("exec through a backend that did not start the service: %+v %v", r, err)
	}
}
