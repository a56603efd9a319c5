package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// groupTest is a test's Groups, a context bounding the test, and a fresh
// group id starting with prefix.
func groupTest(t *testing.T, prefix string) (*Groups, context.Context, string) {
	t.Helper()
	g := newTestGroups(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return g, ctx, prefix + randomHex(4)
}

// bringGroup brings up services as group id on g.
func bringGroup(ctx context.Context, t *testing.T, g *Groups, id string, services map[string]compute.GroupService) *compute.GroupResult {
	t.Helper()
	res, err := g.Bring(ctx, &compute.Group{GroupTarget: compute.GroupTarget{ID: id, RecordID: "rec-" + id, OrgID: "org1", TaskRef: "org1/demo@1"},
		Services: services})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A service whose image has no shell at all (nothing but a static
// program) runs its image's command under the agent, and commands run in
// it: exit codes, the budget (killed, 124), a command that cannot be found
// (127), and the stream with the pid the agent reports.
func TestGroupExecWithoutShellOnDocker(t *testing.T) {
	t.Parallel()
	g, ctx, id := groupTest(t, "gn")
	res := bringGroup(ctx, t, g, id, map[string]compute.GroupService{"app": {Image: noShellImage(t, g.cli)}})
	c, err := g.cli.ContainerInspect(ctx, res.Containers["app"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Config.Entrypoint, []string{agentPath, "--", "/app"}) || len(c.Config.Cmd) != 0 || c.Config.Labels[labelAgent] == "" {
		t.Fatalf("entrypoint %q cmd %q agent label %q: want the agent running the image's command", c.Config.Entrypoint, c.Config.Cmd, c.Config.Labels[labelAgent])
	}
	assertTokenHidden(ctx, t, g.cli, c.ID, g.agentKey.tokenOf(c))
	if !slices.ContainsFunc(c.Mounts, func(m container.MountPoint) bool {
		return m.Name == g.agent.volume && m.Destination == agentDir && !m.RW
	}) {
		t.Fatalf("mounts %+v: want the agent's volume read-only at %s", c.Mounts, agentDir)
	}

	r, err := g.Exec(ctx, id, "app", []string{"/app", "3"}, 20*time.Second, 1<<20)
	if err != nil || r.ExitCode != 3 || r.TimedOut {
		t.Fatalf("exec /app 3: %+v %v", r, err)
	}
	start := time.Now()
	r, err = g.Exec(ctx, id, "app", []string{"/app"}, time.Second, 1<<20)
	if err != nil || r.ExitCode != 124 || !r.TimedOut || time.Since(start) > 15*time.Second {
		t.Fatalf("exec past its budget: %+v %v after %s, want 124 and timed out", r, err, time.Since(start))
	}
	r, err = g.Exec(ctx, id, "app", []string{"/no-such-program"}, 20*time.Second, 1<<20)
	if err != nil || r.ExitCode != 127 || !strings.Contains(string(r.Output), "no-such-program") {
		t.Fatalf("exec of a missing program: %+v %v, want 127 naming it", r, err)
	}
	var evs []compute.ProcessEvent
	sr, err := g.ExecStream(ctx, id, "app", []string{"/app", "5"}, 20*time.Second, func(ev compute.ProcessEvent) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil || sr.ExitCode != 5 || len(evs) != 2 || evs[0].Type != compute.EventStart || evs[0].PID <= 1 ||
		evs[1].Type != compute.EventExit || evs[1].ExitCode != 5 {
		t.Fatalf("exec stream: %+v %v %+v, want start with a pid, then exit 5", sr, err, evs)
	}
}

// The stream of a command in a service: start with its pid first, its
// stdout and stderr, its exit last; the buffered exec caps the output, and
// a command past its budget is killed (not only abandoned) with 124.
func TestGroupExecStreamOnDocker(t *testing.T) {
	t.Parallel()
	g, ctx, id := groupTest(t, "gx")
	bringGroup(ctx, t, g, id, map[string]compute.GroupService{"box": baseService()})

	var evs []compute.ProcessEvent
	var out, errOut string
	sr, err := g.ExecStream(ctx, id, "box", []string{"sh", "-c", "echo out; echo err >&2; echo $$ >&2; exit 4"}, 20*time.Second, func(ev compute.ProcessEvent) error {
		evs = append(evs, ev)
		switch ev.Type {
		case compute.EventStdout:
			out += string(ev.Data)
		case compute.EventStderr:
			errOut += string(ev.Data)
		}
		return nil
	})
	if err != nil || sr.ExitCode != 4 || len(evs) < 3 || evs[0].Type != compute.EventStart || evs[len(evs)-1].Type != compute.EventExit ||
		evs[len(evs)-1].ExitCode != 4 || out != "out\n" || !strings.HasPrefix(errOut, "err\n") {
		t.Fatalf("exec stream: %+v %v %+v (stdout %q, stderr %q)", sr, err, evs, out, errOut)
	}
	if pid := strings.TrimSpace(strings.TrimPrefix(errOut, "err\n")); pid != strconv.Itoa(evs[0].PID) {
		t.Fatalf("the start event says pid %d, the command is %s", evs[0].PID, pid)
	}

	r, err := g.Exec(ctx, id, "box", []string{"echo", "0123456789"}, 20*time.Second, 5)
	if err != nil || string(r.Output) != "01234" || !r.Truncated {
		t.Fatalf("exec with 5 bytes of output: %+v %v", r, err)
	}

	r, err = g.Exec(ctx, id, "box", []string{"sh", "-c", "echo started; exec sleep 1234"}, time.Second, 1<<20)
	if err != nil || r.ExitCode != 124 || !r.TimedOut || string(r.Output) != "started\n" {
		t.Fatalf("exec past its budget: %+v %v, want 124, timed out, and the output so far", r, err)
	}
	evs = nil
	sr, err = g.ExecStream(ctx, id, "box", []string{"sleep", "1235"}, time.Second, func(ev compute.ProcessEvent) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil || !sr.TimedOut || sr.ExitCode != 124 || len(evs) != 2 || evs[0].Type != compute.EventStart || evs[1].ExitCode != 124 {
		t.Fatalf("exec stream past its budget: %+v %v %+v", sr, err, evs)
	}
	eventually(t, 10*time.Second, func() error {
		r, err := g.Exec(ctx, id, "box", []string{"sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"}, 20*time.Second, 1<<20)
		if err != nil {
			return err
		}
		if strings.Contains(string(r.Output), "sleep 123") {
			return errors.New("a command past its budget still runs: " + string(r.Output))
		}
		return nil
	})
}

// A service runs its own command as the engine would have run it (its
// compose entrypoint and command merged with its image's) and as its
// user, also when it dropped the capabilities a root agent would need to
// change users; commands run as that user, as the engine's exec did.
func TestGroupServiceCommandOnDocker(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{Network: testNetwork})
	img := derivedImage(t, p, testImagePrefix+"entrypoint:latest", "true",
		`ENTRYPOINT ["sh","-c","echo \"$0 $*\" > /tmp/argv; id -u > /tmp/uid; exec sleep infinity"]`)
	g, ctx, id := groupTest(t, "gc")
	override := []string{"sh", "-c", `echo "ep $0 $*" > /tmp/argv; id -u > /tmp/uid; exec sleep infinity`}
	bringGroup(ctx, t, g, id, map[string]compute.GroupService{
		"image":      {Image: img},
		"command":    {Image: img, Command: []string{"c1", "c2"}},
		"entrypoint": {Image: img, Entrypoint: override},
		"both":       {Image: img, Entrypoint: override, Command: []string{"c1"}},
		"user":       {Image: img, User: "nobody", WorkingDir: "/tmp"}, // the image's, /root, is root's
		"nocaps":     {Image: img, User: "nobody", WorkingDir: "/tmp", CapDrop: []string{"ALL"}},
		"workdir":    {Image: img, WorkingDir: "/usr", Env: map[string]string{"GREETING": "hi"}},
	})
	// Commands run in the service's working directory, with its
	// environment and none of the agent's, as the engine's exec ran them.
	r, err := g.Exec(ctx, id, "workdir", []string{"sh", "-c", "pwd; echo $GREETING; env | grep DN_AGENT; true"}, 20*time.Second, 1<<20)
	if err != nil || string(r.Output) != "/usr\nhi\n" {
		t.Errorf("exec in a service with a working directory and environment: %q %v", r.Output, err)
	}
	if r, err = g.Exec(ctx, id, "user", []string{"pwd"}, 20*time.Second, 1<<20); err != nil || string(r.Output) != "/tmp\n" {
		t.Errorf("exec as nobody (whose home is /): %q %v, want /tmp", r.Output, err)
	}
	for svc, want := range map[string]string{"image": "sleep infinity", "command": "c1 c2", "entrypoint": "ep sh ", "both": "ep c1 ",
		"user": "sleep infinity", "nocaps": "sleep infinity"} {
		uid := "0"
		if svc == "user" || svc == "nocaps" {
			uid = "65534"
		}
		// The main command may still be writing its files.
		eventually(t, 10*time.Second, func() error {
			r, err := g.Exec(ctx, id, svc, []string{"sh", "-c", "cat /tmp/argv /tmp/uid; id -u"}, 20*time.Second, 1<<20)
			if got := strings.Split(string(r.Output), "\n"); err != nil || len(got) < 3 || got[0] != want || got[1] != uid || got[2] != uid {
				return fmt.Errorf("service %s: %q %v; want argv %q, main command and exec as uid %s", svc, r.Output, err, want, uid)
			}
			return nil
		})
	}
}

func TestMainCommandMergesAsTheEngine(t *testing.T) {
	img := &container.Config{Entrypoint: []string{"/ep"}, Cmd: []string{"cmd"}}
	for _, c := range []struct {
		entrypoint, cmd, want []string
	}{
		{nil, nil, []string{"/ep", "cmd"}},
		{nil, []string{}, []string{"/ep", "cmd"}},
		{nil, []string{"x"}, []string{"/ep", "x"}},
		{[]string{"/other"}, nil, []string{"/other"}}, // an entrypoint given drops the image's cmd
		{[]string{"/other"}, []string{"x"}, []string{"/other", "x"}},
		{[]string{}, nil, []string{"cmd"}}, // an empty entrypoint clears the image's and keeps its cmd
		{[]string{}, []string{"x"}, []string{"x"}},
	} {
		if got := mainCommand(c.entrypoint, c.cmd, img); !slices.Equal(got, c.want) {
			t.Errorf("entrypoint %q cmd %q: %q, want %q", c.entrypoint, c.cmd, got, c.want)
		}
	}
}

// Services started without the agent (by a backend without one) run no
// commands: Exec says why instead of reaching for the engine's exec.
func TestGroupExecWithoutAgentOnDocker(t *testing.T) {
	t.Parallel()
	g := newTestGroups(t, Config{AgentBinary: noAgent})
	id := "ga" + randomHex(4)
	bringGroup(context.Background(), t, g, id, map[string]compute.GroupService{"box": baseService()})
	_, err := g.Exec(context.Background(), id, "box", []string{"true"}, 20*time.Second, 1<<20)
	var pe *compute.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "without the in-container agent") {
		t.Fatalf("exec in a service without the agent: %v", err)
	}
}

// An exec right after its service (re)started waits for the agent to
// listen instead of failing with a refused connection.
func TestGroupExecWaitsForTheAgentOnDocker(t *testing.T) {
	t.Parallel()
	g, _, id := groupTest(t, "gw")
	// Restarts are slow on a loaded engine (one took over a minute): the
	// test's own deadline, not groupTest's.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := bringGroup(ctx, t, g, id, map[string]compute.GroupService{"box": baseService()})
	now := 0
	for i := 0; i < 4; i++ { // without the wait, the 2nd already failed
		if err := g.cli.ContainerRestart(ctx, res.Containers["box"], container.StopOptions{Timeout: &now}); err != nil {
			t.Fatal(err)
		}
		if r, err := g.Exec(ctx, id, "box", []string{"true"}, 20*time.Second, 1<<20); err != nil || r.ExitCode != 0 {
			t.Fatalf("exec %d right after a restart: %+v %v", i, r, err)
		}
	}
}
