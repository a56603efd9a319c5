package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// BenchmarkTransitionEvent measures what the outbox adds to a transition:
// the same gate write alone, and with an event row in its transaction.
//
//	go test ./backend/store -run '^$' -bench TransitionEvent -benchtime 2000x
func BenchmarkTransitionEvent(b *testing.B) {
	for _, d := range dialects {
		for _, withEvent := range []bool{false, true} {
			name := string(d) + "/bare"
			if withEvent {
				name = string(d) + "/with-event"
			}
			b.Run(name, func(b *testing.B) {
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
				if err := db.InsertRecord(ctx, r); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					err := db.Tx(ctx, func(tx *sql.Tx) error {
						cur, err := TransitionTx(ctx, tx, "r1", "", "", func(r *Record) error { r.Diagnostic = time.Now().String(); return nil })
						if err != nil || !withEvent {
							return err
						}
						return insertEventTx(ctx, tx, &Event{ID: newEventID(), OrgID: cur.OrgID, SandboxID: cur.ID,
							Type: "sandbox.lifecycle.updated", At: time.Now(), TemplateID: cur.TemplateID, Metadata: cur.Metadata,
							Cause: sandbox.CauseUser, Data: EventData{SandboxMetadata: cur.Metadata}})
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
