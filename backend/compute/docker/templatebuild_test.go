package docker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/templatebuild"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/testhosts"
)

// buildLog collects a build's log entries.
type buildLog struct {
	mu      sync.Mutex
	entries []compute.TemplateLogEntry
}

func (l *buildLog) add(e compute.TemplateLogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
}

func (l *buildLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, e := range l.entries {
		fmt.Fprintf(&b, "%s %s %s\n", e.Time.Format("15:04:05.0"), e.Step, e.Message)
	}
	return b.String()
}

// testBuild is a build request from the base image with a fresh build id
// whose images (and everything labelled with it) go when the test ends.
func testBuild(t *testing.T, p *Provider, steps ...compute.TemplateStep) (compute.TemplateBuild, *buildLog) {
	t.Helper()
	log := &buildLog{}
	id := "tbtest-" + randomHex(6)
	t.Cleanup(func() { removeBuild(t, p, id) })
	return compute.TemplateBuild{TemplateID: "tbtest", BuildID: id, OrgID: "org-test", FromImage: DefaultBaseImage,
		Steps: steps, CPUCount: 1, MemoryMB: 256, Log: log.add}, log
}

// leftovers lists the containers and images labelled with a build id.
func leftovers(t *testing.T, p *Provider, buildID string) (ctrs, imgs []string) {
	t.Helper()
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", templatebuild.LabelBuild+"="+buildID))
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		ctrs = append(ctrs, c.ID)
	}
	is, err := p.cli.ImageList(ctx, image.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range is {
		imgs = append(imgs, i.ID)
	}
	return ctrs, imgs
}

func removeBuild(t *testing.T, p *Provider, buildID string) {
	ctx := context.Background()
	_ = p.RemoveTemplateImage(ctx, templatebuild.Ref("tbtest", buildID))
	ctrs, imgs := leftovers(t, p, buildID)
	for _, c := range ctrs {
		_ = p.cli.ContainerRemove(ctx, c, container.RemoveOptions{Force: true})
	}
	for _, i := range imgs {
		_, _ = p.cli.ImageRemove(ctx, i, image.RemoveOptions{Force: true})
	}
}

func run(args ...string) compute.TemplateStep { return compute.TemplateStep{Type: "RUN", Args: args} }

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gw)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Uid: 501}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(content))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	_ = gw.Close()
	return buf.Bytes()
}

func mustBuild(t *testing.T, p *Provider, req compute.TemplateBuild) compute.TemplateBuildResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := p.BuildTemplate(ctx, req)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return res
}

// TestTemplateBuildSandboxSeesItsSteps: a template built from ENV,
// WORKDIR, COPY and RUN steps starts a sandbox whose processes see the
// variables, start in the directory and find the copied and created
// files; its image keeps the base's command. A second identical build
// reuses every step, and force rebuilds them.
func TestTemplateBuildSandboxSeesItsSteps(t *testing.T) {
	p := newProvider(t, Config{})
	files := tarGz(t, map[string]string{"hello.txt": "Hello from COPY!", "sub/inner.txt": "inner"})
	req, log := testBuild(t, p,
		compute.TemplateStep{Type: "ENV", Args: []string{"GREETING", "hi there", "PATH", "${PATH}:/my/path"}},
		compute.TemplateStep{Type: "WORKDIR", Args: []string{"/app"}},
		compute.TemplateStep{Type: "COPY", Args: []string{".", "/app/", "user"}, FilesHash: "h1"},
		run(`[[ "$(pwd)" == /app ]] && [[ "$PATH" == *:/my/path ]] && echo "built by $(id -un)" > made.txt && cat hello.txt`),
		compute.TemplateStep{Type: "ENV", Args: []string{"LATE", "$GREETING!"}},
	)
	req.Files = func(_ context.Context, hash string) (io.ReadCloser, error) {
		if hash != "h1" {
			return nil, errors.New("no such files")
		}
		return io.NopCloser(bytes.NewReader(files)), nil
	}
	res := mustBuild(t, p, req)
	if !strings.Contains(log.text(), "Hello from COPY!") {
		t.Errorf("the RUN step's output is not in the log:\n%s", log.text())
	}
	ins, err := p.cli.ImageInspect(context.Background(), res.Image)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ins.Config.Cmd, " "); got != "sleep infinity" || len(ins.Config.Entrypoint) != 0 {
		t.Errorf("the image's entrypoint %q and command %q are not the base's (sleep infinity)", ins.Config.Entrypoint, got)
	}

	tp := newProvider(t, Config{Templates: map[string]compute.Template{"built": {ID: "built", CPUCount: 1, MemoryMB: 256}},
		Images: map[string]string{"built": res.Image}})
	spec := testSpec()
	spec.Template = "built"
	spec.Command = []string{"sh", "-c", "pwd > /tmp/main-cwd; exec sleep infinity"} // the main process starts in WORKDIR
	inst := mustCreate(t, tp, spec)
	out := exec(t, tp, inst, "bash", "-c", `echo "$GREETING|$LATE|$(cat /tmp/main-cwd)|$(cat /app/hello.txt)|$(cat /app/sub/inner.txt)|$(cat /app/made.txt)|$(stat -c %U /app/hello.txt)"`)
	if want := "hi there|hi there!|/app|Hello from COPY!|inner|built by root|user"; strings.TrimSpace(string(out.Stdout)) != want {
		t.Fatalf("the sandbox sees %q, want %q (stderr %q)", strings.TrimSpace(string(out.Stdout)), want, out.Stderr)
	}

	again, log2 := testBuild(t, p, req.Steps...)
	again.Files = req.Files
	res2 := mustBuild(t, p, again)
	for i, s := range res2.Steps {
		if !s.Cached {
			t.Errorf("step %d was not reused by an identical build:\n%s", i+1, log2.text())
		}
	}
	if !strings.Contains(log2.text(), "CACHED [builder 1/5] ENV GREETING hi there PATH ${PATH}:/my/path") {
		t.Errorf("the log does not say the ENV step was cached:\n%s", log2.text())
	}
	if res2.ImageID != res.ImageID {
		t.Errorf("an identical build made image %s, not %s", res2.ImageID, res.ImageID)
	}

	forced, _ := testBuild(t, p, req.Steps...)
	forced.Files, forced.Force = req.Files, true
	res3 := mustBuild(t, p, forced)
	for i, s := range res3.Steps {
		if s.Cached {
			t.Errorf("step %d was reused by a forced build", i+1)
		}
	}
	if res3.ImageID == res.ImageID {
		t.Error("a forced build returned the cached image")
	}
}

// TestTemplateBuildStartCommand: the start command runs with its ENV and
// WORKDIR and the ready command is waited for (logged as E2B does); a
// template built from it inherits both, run in the parent's context, and
// one that overrides them runs its own; a start command that fails fails
// the build.
func TestTemplateBuildStartCommand(t *testing.T) {
	p := newProvider(t, Config{})
	str := func(s string) *string { return &s }
	req, log := testBuild(t, p,
		compute.TemplateStep{Type: "ENV", Args: []string{"BASE_VAR", "base_value"}},
		compute.TemplateStep{Type: "WORKDIR", Args: []string{"/app/base"}})
	req.StartCmd = str(`[[ "$BASE_VAR" == base_value && "$(pwd)" == /app/base ]] || exit 2; echo "Hello, World!"`)
	req.ReadyCmd = str("sleep 1")
	base := mustBuild(t, p, req)
	text := log.text()
	iStart, iWait, iReady := strings.Index(text, "Running start command"), strings.Index(text, "Waiting for template to be ready: sleep 1"), strings.Index(text, "Template is ready")
	if iStart < 0 || iWait < iStart || iReady < iWait || !strings.Contains(text, "[start] [stdout]: Hello, World!") {
		t.Fatalf("the log does not show start, wait and ready in order:\n%s", text)
	}

	derived, log2 := testBuild(t, p, compute.TemplateStep{Type: "WORKDIR", Args: []string{"/app/derived"}})
	derived.FromImage, derived.FromTemplate = "", base.Image
	res := mustBuild(t, p, derived)
	if res.Start.Cmd != *req.StartCmd || res.Start.Dir != "/app/base" || !strings.Contains(log2.text(), "[start] [stdout]: Hello, World!") {
		t.Fatalf("the derived template did not inherit the start command in its parent's context: %+v\n%s", res.Start, log2.text())
	}

	over, _ := testBuild(t, p)
	over.FromImage, over.FromTemplate, over.StartCmd, over.ReadyCmd = "", res.Image, str(`[[ "$(pwd)" == /app/derived ]]`), str("true")
	if got := mustBuild(t, p, over); got.Start.Dir != "/app/derived" {
		t.Fatalf("the overriding start command does not run in the derived directory: %+v", got.Start)
	}

	bad, _ := testBuild(t, p)
	bad.StartCmd, bad.ReadyCmd = str("exit 3"), str("sleep 30")
	_, err := p.BuildTemplate(context.Background(), bad)
	var be *compute.TemplateBuildError
	if !errors.As(err, &be) || be.Kind != compute.KindEntrypoint || !strings.Contains(be.Msg, "code 3") {
		t.Fatalf("a failing start command: want an entrypoint error naming code 3, got %v", err)
	}
}

// buildFails builds req and returns its error, which must name limit.
func buildFails(t *testing.T, p *Provider, req compute.TemplateBuild, limit string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := p.BuildTemplate(ctx, req)
	var be *compute.TemplateBuildError
	if !errors.As(err, &be) {
		t.Fatalf("want a build error naming the %s limit, got %v", limit, err)
	}
	if be.Limit != limit || be.Kind != compute.KindResourceLimit || !strings.Contains(be.Error(), limit) {
		t.Fatalf("want the %s limit named, got limit %q kind %s: %v", limit, be.Limit, be.Kind, be)
	}
	ctrs, imgs := leftovers(t, p, req.BuildID)
	if len(ctrs)+len(imgs) > 0 {
		t.Errorf("the failed build left containers %v and images %v", ctrs, imgs)
	}
}

// TestTemplateBuildLimits: a fork bomb fails on the pids limit, a memory
// hog on the memory limit, a step past its time on the step time limit,
// each named in the error, and each failed build leaves nothing behind.
// (Seen failing without the protection: with PidsLimit unset the bomb's
// step succeeded; with Memory unset the hog's did.)
func TestTemplateBuildLimits(t *testing.T) {
	p := newProvider(t, Config{})
	hog, _ := testBuild(t, p, run(`python3 -c "b = bytearray(512 << 20); print(len(b))"`))
	hog.MemoryMB = 128
	buildFails(t, p, hog, compute.LimitMemory)

	bomb, _ := testBuild(t, p, run("for i in $(seq 400); do sleep 60 & done; wait"))
	bomb.Limits.Pids = 100
	buildFails(t, p, bomb, compute.LimitPids)

	slow, _ := testBuild(t, p, run("sleep 60"))
	slow.Limits.StepTime = 2 * time.Second
	buildFails(t, p, slow, compute.LimitStepTime)
}

// TestTemplateBuildCancelLeavesNothing: a build cancelled while a step
// runs removes its containers and the images of its earlier steps.
func TestTemplateBuildCancelLeavesNothing(t *testing.T) {
	p := newProvider(t, Config{})
	req, log := testBuild(t, p, run("echo one > /one"), run("echo started; sleep 120"))
	req.Force = true // the first step's image is this build's own
	ctx, cancel := context.WithCancel(context.Background())
	req.Log = func(e compute.TemplateLogEntry) {
		log.add(e)
		if e.Message == "started" {
			cancel()
		}
	}
	_, err := p.BuildTemplate(ctx, req)
	if err == nil || compute.KindOf(err) != compute.KindUnavailable {
		t.Fatalf("a cancelled build: want a cancellation error, got %v\n%s", err, log.text())
	}
	ctrs, imgs := leftovers(t, p, req.BuildID)
	if len(ctrs)+len(imgs) > 0 {
		t.Fatalf("the cancelled build left containers %v and images %v", ctrs, imgs)
	}
	if _, err := p.cli.ImageInspect(context.Background(), templatebuild.Ref(req.TemplateID, req.BuildID)); err == nil {
		t.Fatal("the cancelled build tagged its image")
	}
}

// TestTemplateBuildContainment: a RUN step reaches neither a listener on
// the host's address on the build's bridge nor a sandbox on that network,
// and the bridge drops the link-local range (asserted on the installed
// rules; nothing is sent there). The control: a backend without egress
// rules lets the step reach the host, so the rules are what stop it.
func TestTemplateBuildContainment(t *testing.T) {
	reach := func(t *testing.T, p *Provider, ip string, port int) string {
		t.Helper()
		req, log := testBuild(t, p, run(fmt.Sprintf(
			`if timeout 5 bash -c 'echo > /dev/tcp/%s/%d'; then echo "REACHED %s"; else echo "BLOCKED %s"; fi`, ip, port, ip, ip)))
		mustBuild(t, p, req)
		return log.text()
	}
	off := newProvider(t, Config{Network: testNetwork + "-unfiltered", Egress: EgressConfig{Off: true}})
	gw0, _, port0 := hostListener(t, off, testNetwork+"-unfiltered")
	if out := reach(t, off, gw0, port0); !strings.Contains(out, "REACHED") {
		t.Fatalf("control: without egress rules a build step must reach the host's bridge address (else this test proves nothing):\n%s", out)
	}

	p := newProvider(t, Config{Network: testNetwork + "-tbuild"})
	gw, bridge, port := hostListener(t, p, testNetwork+"-tbuild")
	if out := reach(t, p, gw, port); !strings.Contains(out, "BLOCKED") {
		t.Fatalf("a build step reached the host's address %s:\n%s", gw, out)
	}

	spec := testSpec()
	spec.Command = []string{"python3", "-m", "http.server", "8080"}
	inst := mustCreate(t, p, spec)
	listening(t, inst.Endpoints[8080].URL+"/") // the backend reaches it: the step is what is stopped
	if out := reach(t, p, inst.Endpoints[8080].Host, 8080); !strings.Contains(out, "BLOCKED") {
		t.Fatalf("a build step reached sandbox %s:\n%s", inst.Endpoints[8080].Host, out)
	}

	chain := nftList(t, "chain", "inet", egress.Table, "n-"+bridge)
	if !strings.Contains(chain, `ip daddr 169.254.0.0/16 counter name "dropped_link_local" drop`) {
		t.Errorf("the build's bridge does not drop link-local:\n%s", chain)
	}
}

// hostListener listens on the host's address on network name (its
// gateway) and returns it, the bridge and the port.
func hostListener(t *testing.T, p *Provider, name string) (gw, bridge string, port int) {
	t.Helper()
	gw, bridge = gatewayOf(t, p, name)
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return gw, bridge, testhosts.AcceptAll(t, ln)
}

// TestTemplateStartsAtSandboxStart: a sandbox of a template built with a
// start and a ready command is reported started only once its ready
// command succeeded (the start command writes its file two seconds in,
// and the file is there when Create returns), the start command runs in
// its template's context, exec starts in the template's WORKDIR, and a
// start command that fails in the sandbox fails the create, saying so.
// (Seen failing without the agent's start: /tmp/up was missing and exec
// started in /root.)
func TestTemplateStartsAtSandboxStart(t *testing.T) {
	p := newProvider(t, Config{})
	str := func(s string) *string { return &s }
	req, _ := testBuild(t, p,
		compute.TemplateStep{Type: "ENV", Args: []string{"MARK", "from-template"}},
		compute.TemplateStep{Type: "WORKDIR", Args: []string{"/app/w"}})
	req.StartCmd = str(`[ -z "$FAIL_START" ] || exit 7; sleep 2; echo "$MARK $(pwd)" > /tmp/up; exec sleep infinity`)
	req.ReadyCmd = str("test -s /tmp/up")
	res := mustBuild(t, p, req)

	tp := newProvider(t, Config{Templates: map[string]compute.Template{"started": {ID: "started", CPUCount: 1, MemoryMB: 256}},
		Images: map[string]string{"started": res.Image}})
	spec := testSpec()
	spec.Template = "started"
	inst := mustCreate(t, tp, spec)
	out := exec(t, tp, inst, "sh", "-c", `cat /tmp/up; pwd`)
	if got, want := strings.TrimSpace(string(out.Stdout)), "from-template /app/w\n/app/w"; got != want {
		t.Fatalf("at its start the sandbox shows %q, want %q (stderr %q)", got, want, out.Stderr)
	}

	bad := testSpec()
	bad.Template = "started"
	bad.EnvVars = map[string]string{"FAIL_START": "1"}
	cleanupRecord(t, tp, bad.RecordID)
	_, err := tp.Create(context.Background(), bad)
	if compute.KindOf(err) != compute.KindEntrypoint || !strings.Contains(err.Error(), "start command exited with code 7") {
		t.Fatalf("a failing start command: want an entrypoint error naming code 7, got %v", err)
	}
}
