package billing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
)

// A task record whose containers are still being removed (stopping) reads
// as the state it is leaving, and is listed under that state, not killed;
// a runtime's stopping record reads killed as before.
func TestLedgerStoppingTaskReadsWhatItLeaves(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{NoLoops: true})
	now := time.Now().UTC()
	stopping := func(id, kind string, started, paused time.Time) {
		r := &store.Record{ID: id, OrgID: e.Org, Kind: kind, Provider: "docker", Phase: sandbox.PhaseStopping, TemplateID: "base",
			CPUCount: 1, MemoryMB: 512, CreatedAt: now, LastStartedAt: started, LastPausedAt: paused, Metadata: map[string]string{}}
		if !started.IsZero() {
			r.StartedAt = started
		}
		r.StopAt(now)
		if err := storetest.InsertFixture(context.Background(), e.App.DB, r); err != nil {
			t.Fatal(err)
		}
	}
	e.insert("run", sandbox.KindTask, sandbox.PhaseRunning)
	stopping("t-run", sandbox.KindTask, now.Add(-time.Minute), time.Time{})
	stopping("t-paused", sandbox.KindTask, now.Add(-time.Minute), now.Add(-time.Second))
	stopping("t-start", sandbox.KindTask, time.Time{}, time.Time{})
	stopping("rt-stop", sandbox.KindRuntime, now.Add(-time.Minute), time.Time{})
	e.insert("dead", sandbox.KindTask, sandbox.PhaseDeleted)
	for id, want := range map[string]string{"t-run": "running", "t-paused": "paused", "t-start": "starting", "rt-stop": "killed", "dead": "killed"} {
		if got := e.Must(200, "GET", ledgerBase+"/"+id, nil)["state"]; got != want {
			t.Errorf("%s reads %v, want %s", id, got, want)
		}
		if got := e.Must(200, "GET", ledgerBase+"/"+id+"/logs", nil)["state"]; got != want {
			t.Errorf("%s's logs read %v, want %s", id, got, want)
		}
	}
	for q, want := range map[string][]string{
		"?state=killed":                         {"rt-stop", "dead"},
		"?state=running":                        {"run", "t-run"},
		"?state=paused":                         {"t-paused"},
		"?state=starting":                       {"t-start"},
		"?state=running,killed&kind=task":       {"run", "t-run", "dead"},
		"?state=running,running":                {"run", "t-run"},
		"?state=starting,running,paused,killed": {"run", "t-run", "t-paused", "t-start", "rt-stop", "dead"},
	} {
		for _, order := range []string{"", "&order=desc"} {
			got := e.listAll(ledgerBase+q+order, 1, nil)
			w := append([]string(nil), want...)
			if order != "" {
				for i, j := 0, len(w)-1; i < j; i, j = i+1, j-1 {
					w[i], w[j] = w[j], w[i]
				}
			}
			if strings.Join(got, ",") != strings.Join(w, ",") {
				t.Errorf("%s%s: got %v, want %v", q, order, got, w)
			}
		}
	}
}
