package reconciler

import (
	"context"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// The observation writes a running sandbox's egress drops into its
// diagnostic once per change (no write while they stay the same), and the
// line stays beside the failure when the sandbox later exits non-zero.
func TestObserveRecordsEgressViolations(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.insert(t, "sb1", 300)
	r := g.drive(t, "sb1")
	g.fake.SetEgressDrops(r.Ref(), map[string]uint64{"policy": 12, "link_local": 3})
	if err := g.rc.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	r = g.get(t, "sb1")
	want := "egress: 15 packets dropped: 12 by policy (allowOut/denyOut), 3 to link-local (cloud metadata)"
	if r.Phase != sandbox.PhaseRunning || r.Diagnostic != want {
		t.Fatalf("phase %s diagnostic %q, want running with %q", r.Phase, r.Diagnostic, want)
	}
	version := r.Version
	if err := g.rc.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if r = g.get(t, "sb1"); r.Version != version {
		t.Fatalf("unchanged drops were written again (version %d → %d)", version, r.Version)
	}
	g.fake.SetEgressDrops(r.Ref(), map[string]uint64{"policy": 13, "link_local": 3})
	g.fake.SetStatus(r.Ref(), compute.StatusExited, 3)
	if err := g.rc.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	r = g.drive(t, "sb1")
	if r.Phase != sandbox.PhaseFailed || !strings.HasPrefix(r.Diagnostic, "entrypoint error: the main process exited with code 3\negress: 16 packets dropped: 13 by policy") {
		t.Fatalf("phase %s diagnostic %q: the failure and the violations must both show", r.Phase, r.Diagnostic)
	}
}

// A sandbox the observation finds exited (List, which carries no exit
// reason) is failed with the reason Get gives, e.g. the disk watchdog's
// stop. Seen failing without the Get: the diagnostic read only "entrypoint
// error: the main process exited with code 137" (issue 34's disk probe).
func TestObserveExitReasonFromGet(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.insert(t, "sb1", 300)
	r := g.drive(t, "sb1")
	const why = "stopped by the backend: its writable layer passed the disk limit of 64 MB"
	g.fake.SetStatus(r.Ref(), compute.StatusExited, 137)
	g.fake.SetExitReason(r.Ref(), why)
	if err := g.rc.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	r = g.drive(t, "sb1")
	if r.Phase != sandbox.PhaseFailed || !strings.Contains(r.Diagnostic, why) {
		t.Fatalf("phase %s diagnostic %q, want failed naming %q", r.Phase, r.Diagnostic, why)
	}
}
