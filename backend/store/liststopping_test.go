package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Stopping records are listed by what they are leaving (RecordFilter.Stopping,
// by kind and clocks as sandbox.LeavingOf reads them), alone or with phases,
// and a cursor pages through the merged parts in order, both ways.
func TestListStoppingByLeaving(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		org, _, err := db.EnsureOrg(ctx, "o1", 0)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now().UTC().Add(-time.Hour)
		leaving := map[string]sandbox.Leaving{}
		add := func(id, kind string, phase sandbox.Phase, started, paused time.Time) {
			t.Helper()
			r := &Record{ID: id, OrgID: org.ID, Kind: kind, Provider: "docker", Phase: phase, TemplateID: "base",
				CreatedAt: t0, LastStartedAt: started, LastPausedAt: paused}
			if err := db.InsertFixture(ctx, r); err != nil {
				t.Fatal(err)
			}
			if phase == sandbox.PhaseStopping {
				leaving[id] = sandbox.LeavingOf(kind, started, paused)
			}
		}
		add("t-start", sandbox.KindTask, sandbox.PhaseStopping, time.Time{}, time.Time{})
		add("run", sandbox.KindTask, sandbox.PhaseRunning, t0, time.Time{})
		add("t-run", sandbox.KindTask, sandbox.PhaseStopping, t0, time.Time{})
		add("rt-stop", sandbox.KindRuntime, sandbox.PhaseStopping, t0, time.Time{})
		add("t-paused", sandbox.KindTask, sandbox.PhaseStopping, t0, t0.Add(time.Second))
		add("t-resumed", sandbox.KindTask, sandbox.PhaseStopping, t0.Add(2*time.Second), t0.Add(time.Second))
		add("dead", sandbox.KindTask, sandbox.PhaseDeleted, t0, time.Time{})
		want := map[string]sandbox.Leaving{"t-start": sandbox.LeavingStart, "t-run": sandbox.LeavingRunning, "rt-stop": sandbox.LeavingEnded,
			"t-paused": sandbox.LeavingPaused, "t-resumed": sandbox.LeavingRunning}
		for id, l := range want {
			if leaving[id] != l {
				t.Fatalf("%s leaves %d, want %d", id, leaving[id], l)
			}
		}
		list := func(f RecordFilter) string {
			t.Helper()
			var ids []string
			for range 100 {
				recs, err := db.ListRecords(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					ids = append(ids, r.ID)
				}
				if len(recs) < f.Limit {
					break
				}
				f.AfterSeq = recs[len(recs)-1].Seq
			}
			return strings.Join(ids, ",")
		}
		for _, c := range []struct {
			phases   []sandbox.Phase
			stopping []sandbox.Leaving
			want     string
		}{
			{nil, []sandbox.Leaving{sandbox.LeavingRunning}, "t-run,t-resumed"},
			{[]sandbox.Phase{sandbox.PhaseRunning}, []sandbox.Leaving{sandbox.LeavingRunning}, "run,t-run,t-resumed"},
			{[]sandbox.Phase{sandbox.PhaseDeleted}, []sandbox.Leaving{sandbox.LeavingEnded}, "rt-stop,dead"},
			{nil, []sandbox.Leaving{sandbox.LeavingStart, sandbox.LeavingPaused}, "t-start,t-paused"},
			{[]sandbox.Phase{sandbox.PhaseDeleted, sandbox.PhaseRunning}, sandbox.Leavings, "t-start,run,t-run,rt-stop,t-paused,t-resumed,dead"},
		} {
			for _, limit := range []int{1, 2, 50} {
				f := RecordFilter{OrgID: org.ID, Phases: c.phases, Stopping: c.stopping, Limit: limit}
				if got := list(f); got != c.want {
					t.Errorf("phases %v, stopping %v, limit %d: %s, want %s", c.phases, c.stopping, limit, got, c.want)
				}
				f.Desc = true
				rev := strings.Split(c.want, ",")
				slices.Reverse(rev)
				if got := list(f); got != strings.Join(rev, ",") {
					t.Errorf("newest first: phases %v, stopping %v, limit %d: %s, want %v", c.phases, c.stopping, limit, got, rev)
				}
			}
		}
	})
}
