package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/containment"
)

// checkConfined asserts, from inside the container and from the engine,
// what confines inst: the documented capability set (effective and
// bounding), no_new_privs, the pids and memory limits, the log cap.
func checkConfined(t *testing.T, p *Provider, inst compute.Instance, memMB int) {
	t.Helper()
	ctx := context.Background()
	for _, pid := range []string{"self", "1"} { // an exec'd process and the main one
		status, err := containment.Exec(ctx, p.cli, inst.Ref.ID, "cat", "/proc/"+pid+"/status")
		if err != nil {
			t.Fatal(err)
		}
		if err := containment.CheckStatus(status, hardening.Capabilities); err != nil {
			t.Errorf("/proc/%s/status: %v", pid, err)
		}
	}
	pids, mem, err := containment.Limits(ctx, p.cli, inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pids != fmt.Sprint(pidsLimit) || mem != fmt.Sprint(memMB<<20) {
		t.Errorf("cgroup limits: pids %s, memory %s; want %d and %d", pids, mem, pidsLimit, memMB<<20)
	}
	c, err := p.cli.ContainerInspect(ctx, inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if lc := c.HostConfig.LogConfig; lc.Type != "json-file" || lc.Config["max-size"] != hardening.LogMaxSize || lc.Config["max-file"] != hardening.LogMaxFiles {
		t.Errorf("log config %+v, want json-file capped at %s x %s", lc, hardening.LogMaxSize, hardening.LogMaxFiles)
	}
	for _, o := range c.HostConfig.SecurityOpt {
		if strings.Contains(o, "unconfined") {
			t.Errorf("security option %q", o)
		}
	}
}

func TestSandboxConfinement(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	checkConfined(t, p, inst, 512)

	// A raw socket (NET_RAW) is refused: no ARP or packet games on the
	// shared segment.
	res := exec(t, p, inst, "python3", "-c", "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Operation not permitted") {
		t.Errorf("a raw socket was opened (or failed otherwise): exit %d, %s", res.ExitCode, res.Stderr)
	}
}

func TestWarmPoolConfinement(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{Network: testNetwork + "-poolcaps", WarmPoolSize: 1})
	pooled := poolEntries(t, p, 1)[0]
	spec := testSpec()
	spec.MemoryMB = 256
	inst := mustCreate(t, p, spec)
	if inst.Ref.ID != pooled.id {
		t.Fatalf("the create did not claim the warm container %s: %+v", pooled.id, inst)
	}
	checkConfined(t, p, inst, 256)
}

// replaceEverythingScript replaces every file on PATH and /bin/sh with a
// script that exits 0 (a forged `ip` or `sh` that reports success): three
// programs per directory, the rest shell builtins (a program per file took
// minutes on a loaded machine), then
// keeps writing what a process started after that sees: its status and
// the routes.
const replaceEverythingScript = `set -e
cp /bin/busybox /tmp/busybox
for d in $(echo "$PATH" | tr : ' ') /bin /sbin; do
  set -- "$d"/*
  [ -e "$1" ] || [ -L "$1" ] || continue
  /tmp/busybox rm -f "$@"
  for f in "$@"; do printf '#!/tmp/busybox sh\nexit 0\n' > "$f"; done
  /tmp/busybox chmod 755 "$@"
done
while :; do
  /tmp/busybox cat /proc/self/status > /tmp/status.new && /tmp/busybox mv /tmp/status.new /tmp/status
  /tmp/busybox cat /proc/net/route > /tmp/route.new && /tmp/busybox mv /tmp/route.new /tmp/route
  /tmp/busybox sleep 0.1
done`

func TestSandboxReplacingItsBinariesGainsNothing(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	spec := testSpec()
	spec.Network.AllowInternetAccess = ptr(false)
	spec.Command = []string{"sh", "-c", replaceEverythingScript}
	cleanupRecord(t, p, spec.RecordID)

	// Every exec made into the sandbox is recorded, from before its create.
	evCtx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	evC, errC := p.cli.Events(evCtx, events.ListOptions{Since: strconv.FormatInt(time.Now().Unix()-1, 10), Filters: filters.NewArgs(
		filters.Arg("type", "container"), filters.Arg("container", containerName(spec.RecordID)))})
	inst, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	read := func(path string) (string, error) {
		b, err := p.ReadFile(ctx, inst.Ref, path)
		return string(b), err
	}
	var status string
	// The script rewrites every file on PATH first: on a loaded machine's
	// fuse-overlayfs that alone has taken over 30 s.
	eventually(t, 2*time.Minute, func() error {
		s, err := read("/tmp/status")
		if err != nil {
			return err
		}
		if containment.Field(s, "CapEff") == "" {
			return fmt.Errorf("status not written yet: %q", s)
		}
		status = s
		return nil
	})
	if err := containment.CheckStatus(status, hardening.Capabilities); err != nil {
		t.Errorf("a process started after the binaries were replaced: %v", err)
	}
	// The routes read after the create returned: the default route is gone
	// although the sandbox's ip and sh only pretend to work.
	eventually(t, 10*time.Second, func() error {
		routes, err := read("/tmp/route")
		if err != nil {
			return err
		}
		if _, err := read("/tmp/busybox"); err != nil {
			return err
		}
		lines := strings.Split(routes, "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "Iface") {
			return fmt.Errorf("routes not written yet: %q", routes)
		}
		for _, line := range lines[1:] {
			if f := strings.Fields(line); len(f) > 1 && f[1] == "00000000" {
				t.Fatalf("an offline sandbox still has a default route:\n%s", routes)
			}
		}
		return nil
	})
	// A harmless signal marks the end: every event before it has been seen.
	if err := p.cli.ContainerKill(ctx, inst.Ref.ID, "SIGWINCH"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for marked := false; !marked; {
		select {
		case ev := <-evC:
			if strings.HasPrefix(string(ev.Action), "exec_") {
				t.Errorf("the backend ran an exec in the sandbox: %s %v", ev.Action, ev.Actor.Attributes)
			}
			marked = ev.Action == events.ActionKill
		case err := <-errC:
			t.Fatalf("events: %v", err)
		case <-timeout:
			t.Fatal("the marker event never arrived")
		}
	}
}

func TestTemplateRuntime(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	p.RegisterTemplate(compute.Template{ID: "gvisor", CPUCount: 1, MemoryMB: 128, Runtime: "dn-no-such-runtime"}, DefaultBaseImage)
	spec := testSpec()
	spec.Template = "gvisor"
	cleanupRecord(t, p, spec.RecordID)
	_, err := p.Create(ctx, spec)
	wantKind(t, err, compute.KindInvalid)
	for _, want := range []string{"template gvisor: runtime", `"dn-no-such-runtime"`, "available: ", "runc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := p.cli.ContainerInspect(ctx, containerName(spec.RecordID)); err == nil {
		t.Error("a refused create left a container behind")
	}

	p.RegisterTemplate(compute.Template{ID: "named-runc", CPUCount: 1, MemoryMB: 128, Runtime: "runc"}, DefaultBaseImage)
	spec = testSpec()
	spec.Template = "named-runc"
	inst := mustCreate(t, p, spec)
	c, err := p.cli.ContainerInspect(ctx, inst.Ref.ID)
	if err != nil || c.HostConfig.Runtime != "runc" {
		t.Fatalf("runtime of a template asking for runc: %q %v", c.HostConfig.Runtime, err)
	}
}

// The writable layer is capped where the storage driver can (asked of the
// engine, not guessed), and creates work where it cannot (fuse-overlayfs
// here), leaving no probe container behind.
func TestWritableLayerCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t, Config{Network: testNetwork + "-disk-cap", DiskLimitMB: 64}) // its own scope: its watchdog stops no other test's sandbox
	inst := mustCreate(t, p, testSpec())
	c, err := p.cli.ContainerInspect(ctx, inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	capped := p.WritableLayerCapped(ctx)
	if got := c.HostConfig.StorageOpt["size"]; capped != (got == "64M") {
		t.Errorf("writable layer capped %v, but the container's size option is %q", capped, got)
	}
	info, err := p.cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver == "fuse-overlayfs" && capped {
		t.Errorf("the provider believes %s caps writable layers", info.Driver)
	}
	t.Logf("storage driver %s: writable layer capped: %v", info.Driver, capped)
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelScope+"="+p.cfg.Scope))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Labels[compute.LabelRecord] == "" && c.Labels[labelPool] == "" && !strings.HasPrefix(c.Names[0], "/"+namePrefix) {
			t.Errorf("the probe left container %v behind", c.Names)
		}
	}
}
