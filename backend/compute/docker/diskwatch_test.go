package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// A sandbox that writes past the disk limit does not keep the host's
// disk: where the storage driver caps writable layers the write fails
// with ENOSPC; where it cannot (fuse-overlayfs here) the watchdog stops
// the sandbox and every Get says why. A sandbox under the limit is left
// alone. Its own deployment scope, so its small limit touches no other
// test's containers.
func TestDiskLimitStopsSandboxPastIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	p := newProvider(t, Config{Network: testNetwork + "-disk", DiskLimitMB: 32, DiskWatchEvery: 200 * time.Millisecond})
	small := mustCreate(t, p, testSpec())
	big := mustCreate(t, p, testSpec())
	if res, err := p.Exec(ctx, small.Ref, compute.ExecRequest{Cmd: []string{"sh", "-c", "head -c 4000000 /dev/zero > /small"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("writing 4 MB: %+v %v", res, err)
	}
	detail, warn := p.DiskLimit(ctx)
	t.Logf("disk limit: %s", detail)
	began := time.Now()
	res, err := p.Exec(ctx, big.Ref, compute.ExecRequest{Cmd: []string{"sh", "-c", "head -c 100000000 /dev/zero > /big"}})
	t.Logf("exec: %+v %v after %s", res.ExitCode, err, time.Since(began))
	if p.WritableLayerCapped(ctx) {
		if warn || err != nil || res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left") {
			t.Fatalf("writing 100 MB past a 32 MB cap: %+v %v (%s), want ENOSPC", res, err, detail)
		}
		return
	}
	if !warn || !strings.Contains(detail, "cannot cap") {
		t.Errorf("the detail of an engine that cannot cap does not say so: %s", detail)
	}
	eventually(t, 3*time.Minute, func() error { // a round sizes every layer: tens of seconds at load 20+
		in, err := p.Get(ctx, big.Ref)
		if err != nil {
			return err
		}
		if in.Status != compute.StatusExited || !strings.Contains(in.ExitReason, "disk limit of 32 MB") {
			return fmt.Errorf("status %s, reason %q: want exited past the disk limit", in.Status, in.ExitReason)
		}
		return nil
	})
	t.Logf("stopped %s after the write began", time.Since(began))
	// Three more rounds of the watchdog later, the one under the limit runs.
	from := p.diskRounds.Load()
	eventually(t, 3*time.Minute, func() error {
		if p.diskRounds.Load() < from+3 {
			return errors.New("waiting for three more rounds of the watchdog")
		}
		return nil
	})
	t.Logf("three rounds in %s", time.Since(began))
	if in, err := p.Get(ctx, small.Ref); err != nil || in.Status != compute.StatusRunning {
		t.Fatalf("the sandbox under the limit: %+v %v, want running", in, err)
	}
}

// A task service is held to the same limit: the deployment's watchdog
// stops a service (of the provider's own groups) that writes past it.
func TestDiskLimitStopsTaskServicePastIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	p := newProvider(t, Config{Network: testNetwork + "-disk-task", DiskLimitMB: 32, DiskWatchEvery: 200 * time.Millisecond})
	g, err := p.Groups(GroupConfig{Owner: p.cfg.Scope})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := g.RemoveAll(cctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	id := "dk" + randomHex(4)
	res := bringGroup(ctx, t, g, id, map[string]compute.GroupService{"app": {Image: DefaultBaseImage, Command: []string{"sleep", "infinity"}}})
	if p.WritableLayerCapped(ctx) {
		r, err := g.Exec(ctx, id, "app", []string{"sh", "-c", "head -c 100000000 /dev/zero > /big"}, time.Minute, 1<<20)
		if err != nil || r.ExitCode == 0 || !strings.Contains(string(r.Output), "No space left") {
			t.Fatalf("writing 100 MB past a 32 MB cap: %+v %v, want ENOSPC", r, err)
		}
		return
	}
	_, _ = g.Exec(ctx, id, "app", []string{"sh", "-c", "head -c 100000000 /dev/zero > /big"}, time.Minute, 1<<20) // may be cut by the stop
	eventually(t, 3*time.Minute, func() error {                                                                   // a round sizes every layer: tens of seconds at load 20+
		c, err := p.cli.ContainerInspect(ctx, res.Containers["app"])
		if err != nil {
			return err
		}
		if c.State.Running || c.State.ExitCode != 137 {
			return fmt.Errorf("service state %s, exit code %d: want killed past the disk limit", c.State.Status, c.State.ExitCode)
		}
		if _, err := p.cli.ContainerStatPath(ctx, c.ID, diskStoppedPath); err != nil {
			return fmt.Errorf("stopped, but not marked as stopped for its disk: %w", err)
		}
		return nil
	})
}
