package docker

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

func TestCreateRunningWithLabelsAndLoopbackPorts(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	spec := testSpec()
	spec.Metadata = map[string]string{"owner": "alice"}
	spec.EnvVars = map[string]string{"GREETING": "hello world"}
	spec.Command = []string{"python3", "-m", "http.server", "8080"}
	inst := mustCreate(t, p, spec)

	if inst.Status != compute.StatusRunning || inst.RecordID != spec.RecordID || inst.OrgID != "org-test" {
		t.Fatalf("instance = %+v", inst)
	}
	if inst.CPUCount != 1 || inst.MemoryMB != 512 || inst.StartedAt.IsZero() {
		t.Fatalf("template defaults not applied: %+v", inst)
	}
	c, err := p.cli.ContainerInspect(context.Background(), inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "/dn-"+spec.RecordID {
		t.Errorf("name = %s", c.Name)
	}
	for k, v := range map[string]string{
		compute.LabelManaged: "true", compute.LabelRecord: spec.RecordID, compute.LabelOrg: "org-test",
		compute.LabelKind: "runtime", "dev.dreadnode.meta.owner": "alice",
	} {
		if got := c.Config.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	onNet, ok := c.NetworkSettings.Networks[testNetwork]
	if !ok {
		t.Fatalf("not on network %s: %v", testNetwork, c.NetworkSettings.Networks)
	}
	assertNothingPublished(t, c)
	// The router dials the container on its network, never a host port.
	ep, ok := inst.Endpoints[8080]
	if !ok || ep.Host != onNet.IPAddress || ep.Port != 8080 || ep.URL != fmt.Sprintf("http://%s:8080", onNet.IPAddress) {
		t.Fatalf("endpoints = %+v", inst.Endpoints)
	}
	eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(ep.URL + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	if out := exec(t, p, inst, "sh", "-c", "echo $GREETING"); string(out.Stdout) != "hello world\n" {
		t.Errorf("env var: %q", out.Stdout)
	}

	got, err := p.Get(context.Background(), inst.Ref)
	if err != nil || got.Status != compute.StatusRunning || got.Endpoints[8080] != ep {
		t.Fatalf("get = %+v, %v", got, err)
	}
	list, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(in compute.Instance) bool { return in.Ref.ID == inst.Ref.ID })
	if i < 0 || list[i].RecordID != spec.RecordID || list[i].Status != compute.StatusRunning || list[i].Endpoints[8080] != ep {
		t.Fatalf("list misses or misreports the instance: %+v", list)
	}
}

func TestCreateIsIdempotent(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	spec := testSpec()
	cleanupRecord(t, p, spec.RecordID)

	// Concurrent creates of one record end up with one container.
	ids := make([]string, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			inst, err := p.Create(context.Background(), spec)
			if err != nil {
				t.Errorf("create %d: %v", i, err)
				return
			}
			if inst.Status != compute.StatusRunning {
				t.Errorf("create %d: status %s", i, inst.Status)
			}
			ids[i] = inst.Ref.ID
		})
	}
	wg.Wait()
	if ids[0] == "" || slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
		t.Fatalf("creates returned different containers: %v", ids)
	}
	cs, err := p.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", compute.LabelRecord+"="+spec.RecordID))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("want 1 container for the record, got %d (%v)", len(cs), err)
	}

	// A container a crash left only created is adopted and started.
	spec2 := testSpec()
	cleanupRecord(t, p, spec2.RecordID)
	created, err := p.cli.ContainerCreate(context.Background(),
		&container.Config{Image: DefaultBaseImage, Labels: map[string]string{compute.LabelManaged: "true", compute.LabelRecord: spec2.RecordID}},
		nil, nil, nil, containerName(spec2.RecordID))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := p.Create(context.Background(), spec2)
	if err != nil || inst.Ref.ID != created.ID || inst.Status != compute.StatusRunning {
		t.Fatalf("adopt: %+v, %v", inst, err)
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	ctx := context.Background()

	res, err := p.Exec(ctx, inst.Ref, compute.ExecRequest{
		Cmd: []string{"sh", "-c", `echo "out $FOO $(pwd)"; echo err >&2; exit 7`},
		Env: map[string]string{"FOO": "bar"}, Cwd: "/tmp",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || string(res.Stdout) != "out bar /tmp\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("result = %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}

	// Large output is demultiplexed intact.
	res = exec(t, p, inst, "python3", "-c", "import sys; sys.stdout.write('x'*3000000)")
	if len(res.Stdout) != 3000000 || res.ExitCode != 0 {
		t.Fatalf("large output: %d bytes, exit %d", len(res.Stdout), res.ExitCode)
	}

	// A missing command is an exit code, as in a shell, not a provider error.
	res, err = p.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"/no/such/binary"}})
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("missing binary: %+v %v", res, err)
	}

	_, err = p.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}, Cwd: "relative"})
	wantKind(t, err, compute.KindInvalid)

	// A timeout kills the command (and its children) but not the sandbox.
	start := time.Now()
	res, err = p.Exec(ctx, inst.Ref, compute.ExecRequest{
		// Long enough for a loaded engine to run the echo; the sleeps outlast it.
		Cmd: []string{"sh", "-c", "echo started; sleep 300 & sleep 301"}, Timeout: 3 * time.Second,
	})
	wantKind(t, err, compute.KindTimeout)
	if time.Since(start) > 10*time.Second || string(res.Stdout) != "started\n" {
		t.Fatalf("timeout took %s, stdout %q", time.Since(start), res.Stdout)
	}
	eventually(t, 10*time.Second, func() error {
		out := exec(t, p, inst, "ps", "-o", "args")
		if bytes.Contains(out.Stdout, []byte("sleep 30")) {
			return fmt.Errorf("timed-out processes still alive:\n%s", out.Stdout)
		}
		return nil
	})
	if got, err := p.Get(ctx, inst.Ref); err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("sandbox after exec timeout: %+v %v", got, err)
	}

	_, err = p.Exec(ctx, compute.Ref{ID: "dn-no-such-container"}, compute.ExecRequest{Cmd: []string{"true"}})
	wantKind(t, err, compute.KindNotFound)
}

func TestFiles(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	ctx := context.Background()

	data := []byte("binary \x00\xff data\n")
	for _, name := range []string{"/tmp/a.txt", "/root/new/dir/b.bin", "/tmp/a.txt"} {
		if err := p.WriteFile(ctx, inst.Ref, name, data); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		got, err := p.ReadFile(ctx, inst.Ref, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %s = %q, %v", name, got, err)
		}
		data = append(data, 'x') // the third write replaces the first file
	}
	if out := exec(t, p, inst, "cat", "/root/new/dir/b.bin"); !bytes.HasPrefix(out.Stdout, []byte("binary")) {
		t.Fatalf("file not visible to the sandbox: %q", out.Stdout)
	}
	exec(t, p, inst, "ln", "-s", "/tmp/a.txt", "/tmp/link")
	if got, err := p.ReadFile(ctx, inst.Ref, "/tmp/link"); err != nil || !bytes.HasPrefix(got, []byte("binary")) {
		t.Fatalf("read through symlink = %q, %v", got, err)
	}

	_, err := p.ReadFile(ctx, inst.Ref, "/no/such/file")
	wantKind(t, err, compute.KindNotFound)
	_, err = p.ReadFile(ctx, inst.Ref, "relative/path")
	wantKind(t, err, compute.KindInvalid)
	_, err = p.ReadFile(ctx, inst.Ref, "/etc")
	wantKind(t, err, compute.KindInvalid)
	wantKind(t, p.WriteFile(ctx, inst.Ref, "relative", data), compute.KindInvalid)
	_, err = p.ReadFile(ctx, compute.Ref{ID: "dn-no-such-container"}, "/etc/hostname")
	wantKind(t, err, compute.KindNotFound)
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	ctx := context.Background()

	if err := p.Pause(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Get(ctx, inst.Ref); err != nil || got.Status != compute.StatusPaused {
		t.Fatalf("after pause: %+v %v", got, err)
	}
	wantKind(t, p.Pause(ctx, inst.Ref), compute.KindConflict)
	_, err := p.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}})
	wantKind(t, err, compute.KindConflict)

	got, err := p.Resume(ctx, inst.Ref)
	if err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("resume: %+v %v", got, err)
	}
	_, err = p.Resume(ctx, inst.Ref)
	wantKind(t, err, compute.KindConflict)
	if res := exec(t, p, inst, "true"); res.ExitCode != 0 {
		t.Fatalf("exec after resume: %+v", res)
	}
	wantKind(t, p.Pause(ctx, compute.Ref{ID: "dn-no-such-container"}), compute.KindNotFound)
}

// derivedImage commits the base image after running script in it, with
// Dockerfile-style changes: test images without a registry.
func derivedImage(t *testing.T, p *Provider, ref, script string, changes ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := p.cli.ImageInspect(ctx, ref); err == nil {
		return ref
	}
	c, err := p.cli.ContainerCreate(ctx, &container.Config{Image: DefaultBaseImage, Cmd: []string{"sh", "-c", script}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.removeQuietly(c.ID)
	waitC, errC := p.cli.ContainerWait(ctx, c.ID, container.WaitConditionNextExit)
	if err := p.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			t.Fatalf("building %s: script exited with %d", ref, w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	changes = append(changes, `CMD ["sleep","infinity"]`)
	if _, err := p.cli.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: ref, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestDeleteRemovesContainerAndVolumes(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	p.RegisterTemplate(compute.Template{ID: "with-volume", CPUCount: 1, MemoryMB: 128}, derivedImage(t, p, testImagePrefix+"volume:latest", "true", "VOLUME /data"))
	spec := testSpec()
	spec.Template = "with-volume"
	inst := mustCreate(t, p, spec)
	ctx := context.Background()

	c, err := p.cli.ContainerInspect(ctx, inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Besides the agent's shared volume, which outlives the sandbox.
	own := slices.DeleteFunc(slices.Clone(c.Mounts), func(m container.MountPoint) bool { return m.Name == p.agent.volume })
	if len(own) != 1 || own[0].Name == "" {
		t.Fatalf("want one anonymous volume: %+v %v", c.Mounts, err)
	}
	vol := own[0].Name
	if err := p.Delete(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	_, err = p.Get(ctx, inst.Ref)
	wantKind(t, err, compute.KindNotFound)
	if !compute.IsNotFound(err) {
		t.Fatal("IsNotFound is false")
	}
	if _, err := p.cli.VolumeInspect(ctx, vol); err == nil {
		t.Errorf("volume %s survived the delete", vol)
	}
	if _, err := p.cli.VolumeInspect(ctx, p.agent.volume); err != nil {
		t.Errorf("the agent's shared volume went with the sandbox: %v", err)
	}
	if err := p.Delete(ctx, inst.Ref); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestCommandExitObservedByGetAndWatch(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := p.Watch(ctx)

	okSpec, failSpec, oomSpec := testSpec(), testSpec(), testSpec()
	okSpec.Command = []string{"sh", "-c", "echo done"}
	failSpec.Command = []string{"sh", "-c", "echo failing >&2; exit 3"}
	oomSpec.Command = []string{"python3", "-c", "b = bytearray(512 << 20)"}
	oomSpec.MemoryMB = 64
	want := map[string]int{okSpec.RecordID: 0, failSpec.RecordID: 3, oomSpec.RecordID: 137}
	insts := map[string]compute.Instance{}
	for _, spec := range []compute.Spec{okSpec, failSpec, oomSpec} {
		insts[spec.RecordID] = mustCreate(t, p, spec)
	}
	for rec, code := range want {
		eventually(t, 30*time.Second, func() error {
			got, err := p.Get(ctx, insts[rec].Ref)
			if err != nil {
				return err
			}
			if got.Status != compute.StatusExited || got.ExitCode != code || got.ExitReason == "" {
				return fmt.Errorf("%s: %s code %d (%q), want exited %d", rec, got.Status, got.ExitCode, got.ExitReason, code)
			}
			// The engine reports OOMKilled unless it lost the OOM event (cgroup v2
			// race); then the reason still names memory.
			if rec == oomSpec.RecordID && !strings.Contains(got.ExitReason, "out of memory") {
				return fmt.Errorf("exit reason %q", got.ExitReason)
			}
			return nil
		})
	}
	if logs, err := p.Logs(ctx, insts[failSpec.RecordID].Ref); err != nil || logs != "failing\n" {
		t.Errorf("logs = %q, %v", logs, err)
	}
	_, err := p.Exec(ctx, insts[okSpec.RecordID].Ref, compute.ExecRequest{Cmd: []string{"true"}})
	wantKind(t, err, compute.KindConflict)

	seen := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for len(seen) < len(want) {
		select {
		case ev := <-events:
			if _, ok := want[ev.RecordID]; ok && ev.Status == compute.StatusExited {
				if ev.Ref.ID != insts[ev.RecordID].Ref.ID {
					t.Errorf("event ref %s, want %s", ev.Ref.ID, insts[ev.RecordID].Ref.ID)
				}
				seen[ev.RecordID] = true
			}
		case <-timeout:
			t.Fatalf("watch saw exits of %v, want all of %v", seen, want)
		}
	}
	cancel()
	for range events { // the channel is closed once ctx is done
	}
}

func TestImageMissing(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{BaseImage: "dreadnode/no-such-image:latest"})
	spec := testSpec()
	cleanupRecord(t, p, spec.RecordID)
	_, err := p.Create(context.Background(), spec)
	wantKind(t, err, compute.KindImageMissing)
	if !strings.Contains(err.Error(), "make image") {
		t.Errorf("message does not tell how to build the image: %v", err)
	}
	_, err = p.Create(context.Background(), compute.Spec{RecordID: spec.RecordID, Template: "no-such-template"})
	wantKind(t, err, compute.KindInvalid)
}

func TestBadEntrypointLeavesNoContainer(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	for _, cmd := range [][]string{{"/no/such/entrypoint"}, {"/etc/hostname"}} {
		spec := testSpec()
		spec.Command = cmd
		cleanupRecord(t, p, spec.RecordID)
		_, err := p.Create(context.Background(), spec)
		wantKind(t, err, compute.KindEntrypoint)
		_, err = p.Get(context.Background(), compute.Ref{ID: containerName(spec.RecordID)})
		wantKind(t, err, compute.KindNotFound)
	}
}

func TestResourceLimits(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	spec := testSpec()
	spec.CPUCount, spec.MemoryMB = 2, 256
	inst := mustCreate(t, p, spec)
	c, err := p.cli.ContainerInspect(context.Background(), inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.HostConfig.NanoCPUs != 2e9 || c.HostConfig.Memory != 256<<20 || *c.HostConfig.PidsLimit != pidsLimit {
		t.Fatalf("limits: cpu %d mem %d", c.HostConfig.NanoCPUs, c.HostConfig.Memory)
	}
	if inst.CPUCount != 2 || inst.MemoryMB != 256 {
		t.Fatalf("instance reports %d CPU %d MB", inst.CPUCount, inst.MemoryMB)
	}
	m, err := p.Metrics(context.Background(), inst.Ref)
	if err != nil || m.MemoryLimitBytes != 256<<20 || m.MemoryUsedBytes == 0 || m.Pids == 0 || m.CPUCount != 2 {
		t.Fatalf("metrics = %+v, %v", m, err)
	}

	for _, bad := range []struct{ cpu, mem int }{{1024, 0}, {0, 1}} {
		spec := testSpec()
		spec.CPUCount, spec.MemoryMB = bad.cpu, bad.mem
		cleanupRecord(t, p, spec.RecordID)
		_, err := p.Create(context.Background(), spec)
		wantKind(t, err, compute.KindResourceLimit)
	}
	spec = testSpec()
	spec.CPUCount = -1
	_, err = p.Create(context.Background(), spec)
	wantKind(t, err, compute.KindInvalid)
}

// hasDefaultRoute reads /proc/net/route inside the sandbox.
func hasDefaultRoute(t *testing.T, p *Provider, inst compute.Instance) bool {
	t.Helper()
	out := exec(t, p, inst, "cat", "/proc/net/route").Stdout
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "00000000" {
			return true
		}
	}
	return false
}

func TestNoInternetAccess(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	open := mustCreate(t, p, testSpec())
	spec := testSpec()
	spec.Network.AllowInternetAccess = ptr(false)
	closed := mustCreate(t, p, spec)

	// An image without `ip` gets its route removed by a helper container.
	p.RegisterTemplate(compute.Template{ID: "no-ip", CPUCount: 1, MemoryMB: 128},
		derivedImage(t, p, testImagePrefix+"no-ip:latest", "rm /usr/local/bin/ip && ! command -v ip"))
	spec = testSpec()
	spec.Template = "no-ip"
	spec.Network.AllowInternetAccess = ptr(false)
	closedNoIP := mustCreate(t, p, spec)

	if !hasDefaultRoute(t, p, open) {
		t.Error("a sandbox with internet access has no default route")
	}
	if hasDefaultRoute(t, p, closed) || hasDefaultRoute(t, p, closedNoIP) {
		t.Error("a sandbox without internet access still has a default route")
	}
	if len(closed.Endpoints) != 0 {
		t.Errorf("isolated sandbox reports endpoints %v (Docker publishes none on internal networks)", closed.Endpoints)
	}
	c, err := p.cli.ContainerInspect(context.Background(), closed.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.NetworkSettings.Networks[testNetwork+"-isolated"]; !ok || len(c.NetworkSettings.Networks) != 1 {
		t.Fatalf("isolated sandbox networks: %v", c.NetworkSettings.Networks)
	}
	n, err := p.cli.NetworkInspect(context.Background(), testNetwork+"-isolated", network.InspectOptions{})
	if err != nil || !n.Internal {
		t.Fatalf("isolated network is not internal: %+v %v", n, err)
	}
	// Reachable through exec and files all the same.
	if err := p.WriteFile(context.Background(), closed.Ref, "/tmp/x", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if out := exec(t, p, closed, "cat", "/tmp/x"); string(out.Stdout) != "ok" {
		t.Fatalf("exec in isolated sandbox: %q", out.Stdout)
	}
}

func TestConcurrentNetworkCreation(t *testing.T) {
	t.Parallel()
	name := testNetwork + "-race"
	ids := make([]string, 6)
	var wg sync.WaitGroup
	for i := range ids {
		p := newProvider(t, Config{Network: name}) // separate providers: no shared mutex
		wg.Go(func() {
			id, err := p.ensureNetwork(context.Background(), name, false)
			if err != nil {
				t.Errorf("ensure %d: %v", i, err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	if slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
		t.Fatalf("providers settled on different networks: %v", ids)
	}
	p := newProvider(t, Config{})
	nets, err := p.cli.NetworkList(context.Background(), network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil || len(nets) != 1 || nets[0].Labels[compute.LabelManaged] != "true" {
		t.Fatalf("want one managed network %s, got %+v %v", name, nets, err)
	}
}

func TestDaemonUnreachable(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{Host: "unix:///nonexistent/docker.sock"})
	wantKind(t, p.Ping(context.Background()), compute.KindUnavailable)
	_, err := p.Create(context.Background(), testSpec())
	wantKind(t, err, compute.KindUnavailable)
	_, err = p.List(context.Background())
	wantKind(t, err, compute.KindUnavailable)
}

func TestPingTemplatesLogsMetrics(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	if err := p.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Name() != "docker" {
		t.Fatal(p.Name())
	}
	tmpls, err := p.Templates(ctx)
	if err != nil || len(tmpls) != 1 || tmpls[0].ID != "base" || tmpls[0].MemoryMB != 512 || !slices.Equal(tmpls[0].Ports, []int{8080}) {
		t.Fatalf("templates = %+v %v", tmpls, err)
	}
	spec := testSpec()
	spec.Command = []string{"sh", "-c", "echo to-stdout; echo to-stderr >&2; exec sleep infinity"}
	inst := mustCreate(t, p, spec)
	eventually(t, 10*time.Second, func() error {
		logs, err := p.Logs(ctx, inst.Ref)
		// Docker copies the two pipes separately: their relative order is not kept.
		if err != nil || (logs != "to-stdout\nto-stderr\n" && logs != "to-stderr\nto-stdout\n") {
			return fmt.Errorf("logs = %q, %v", logs, err)
		}
		return nil
	})
	exec(t, p, inst, "sh", "-c", "head -c 1000000 /dev/zero > /root/blob")
	// Disk usage is sampled off the request path (the engine walks the
	// writable layer, seconds on a loaded host) and a failed reading answers
	// 0 once, so poll with a deadline rather than trust the first answer.
	eventually(t, 60*time.Second, func() error {
		m, err := p.Metrics(ctx, inst.Ref)
		if err != nil || m.MemoryUsedBytes == 0 || m.MemoryLimitBytes != 512<<20 || m.Pids == 0 || m.DiskUsedBytes < 1000000 || m.CPUCount != 1 {
			return fmt.Errorf("metrics = %+v, %v", m, err)
		}
		return nil
	})
	// A busy loop shows up as CPU use between two readings.
	exec(t, p, inst, "sh", "-c", `timeout 60 sh -c 'while :; do :; done' >/dev/null 2>&1 &`)
	eventually(t, 30*time.Second, func() error {
		m, err := p.Metrics(ctx, inst.Ref)
		if err != nil || m.CPUPercent < 10 || m.CPUPercent > 110 {
			return fmt.Errorf("metrics = %+v, %v", m, err)
		}
		return nil
	})
	if err := p.SetTimeout(ctx, inst.Ref, time.Minute); err != nil {
		t.Fatal(err)
	}
}
