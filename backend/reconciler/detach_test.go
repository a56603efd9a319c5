package reconciler

import (
	"context"
	"errors"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Work detached from a step (a build off the lanes) keeps the record's
// lease after the step returned: no other replica claims the record until
// the work releases it, and once another replica has it the work may no
// longer act.
func TestDetachKeepsTheLeasePastTheStep(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		g := newReplicas(t, url)
		ctx := context.Background()
		g.insert(t, "sb1")
		var work context.Context
		var release func()
		ran, err := g.a.withLease(ctx, "sb1", func(step context.Context) error {
			var ok bool
			if work, release, ok = g.a.Detach(step, ctx); !ok {
				return errors.New("a step holding its lease could not detach")
			}
			return nil
		})
		if !ran || err != nil {
			t.Fatalf("step: ran %v, %v", ran, err)
		}
		if err := g.a.MayAct(work); err != nil {
			t.Fatalf("the detached work may not act after its step returned: %v", err)
		}
		if _, _, ok, err := g.b.leases.acquire(ctx, "sb1"); ok || err != nil {
			t.Fatalf("replica B claimed a record whose detached work still runs on A (ok %v, %v)", ok, err)
		}
		release()
		_, releaseB, ok, err := g.b.leases.acquire(ctx, "sb1")
		if !ok || err != nil {
			t.Fatalf("replica B could not claim the record once the work ended (ok %v, %v)", ok, err)
		}
		defer releaseB()
		if err := g.a.MayAct(work); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("the ended work may still act: %v", err)
		}
		// Nothing to retain once the lease is gone.
		if _, _, ok := g.a.Detach(store.WithFence(ctx, store.Fence{ID: "sb1"}), ctx); ok {
			t.Fatal("detached under a lease this replica does not hold")
		}
		// A step without a lease (a driver called directly) detaches without one.
		if c, rel, ok := g.a.Detach(ctx, ctx); !ok || c != ctx {
			t.Fatal("a step without a lease could not detach")
		} else {
			rel()
		}
	})
}
