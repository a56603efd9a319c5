package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// BenchmarkTransitionEvent measures what the outbox adds to a transition:
// the same gate write alone and with an event row in its transaction,
// alternated in one loop so both see the same load (the machine is
// shared), reported as p50 and p99 of each.
//
//	go test ./backend/store -run '^$' -bench TransitionEvent -benchtime 4000x
func BenchmarkTransitionEvent(b *testing.B) {
	for _, d := range dialects {
		b.Run(string(d), func(b *testing.B) {
			url := filepath.Join(b.TempDir(), "b.db")
			if d == Postgres {
				url = pgtest.Database(b)
			}
			db, err := Open(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			org, _, _ := db.EnsureOrg(ctx, "o1", 0)
			r := &Record{ID: "r1", OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhaseRunning,
				TemplateID: "base", Metadata: map[string]string{"k": "v"}}
			if err := db.InsertFixture(ctx, r); err != nil {
				b.Fatal(err)
			}
			var bare, with []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				withEvent := i%2 == 1
				start := time.Now()
				err := db.Tx(ctx, func(tx *sql.Tx) error {
					cur, err := TransitionTx(ctx, tx, "r1", "", "", func(r *Record) error { r.Diagnostic = start.String(); return nil })
					if err != nil || !withEvent {
						return err
					}
					return insertEventTx(ctx, tx, &Event{ID: newEventID(), OrgID: cur.OrgID, SandboxID: cur.ID,
						Type: "sandbox.lifecycle.updated", At: start, TemplateID: cur.TemplateID, Metadata: cur.Metadata,
						Cause: sandbox.CauseUser, Data: EventData{SandboxMetadata: cur.Metadata}})
				})
				if err != nil {
					b.Fatal(err)
				}
				if withEvent {
					with = append(with, time.Since(start))
				} else {
					bare = append(bare, time.Since(start))
				}
			}
			b.StopTimer()
			for _, m := range []struct {
				name string
				ds   []time.Duration
			}{{"bare", bare}, {"with-event", with}} {
				if len(m.ds) == 0 {
					continue
				}
				slices.Sort(m.ds)
				b.ReportMetric(float64(m.ds[len(m.ds)/2].Microseconds()), m.name+"-p50-µs")
				b.ReportMetric(float64(m.ds[len(m.ds)*99/100].Microseconds()), m.name+"-p99-µs")
			}
		})
	}
}
