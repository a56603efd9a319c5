package reconciler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/keyed"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// A replica drives a record only while it holds the record's lease
// (store.ClaimLease), and its phase changes carry the lease's fence, so a
// replica that lost a record (it froze or was cut from the database past
// its lease, and another replica took over) changes nothing in it. Its
// provider calls cannot carry a fence: before each one it checks that it
// still holds the lease locally (mayAct), judged on its own monotonic clock
// against the last renewal the database acknowledged, with a margin.
// DESIGN.md "Replicas and leases".

// DefaultLeaseTTL is how long a replica's lease lasts without renewal: the
// most a dead replica's records wait before another takes them over.
const DefaultLeaseTTL = 10 * time.Second

// NewReplicaID names a replica uniquely for its leases: host, process and
// a random part (a restarted process, or a container whose pid is always
// 1, still gets a new name).
func NewReplicaID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// processReplicaID is the replica id of Reconcilers configured without one:
// one per process, so a Reconciler made again on the same database (a test
// of a restart) takes back what the previous one held at once.
var processReplicaID = sync.OnceValue(NewReplicaID)

// leaseTable is the leases one replica holds, with how many local steps use
// each: a lease is released when the last of them ends.
type leaseTable struct {
	db     *store.DB
	owner  string
	ttl    time.Duration
	margin time.Duration // how much sooner than the database the replica gives a lease up
	log    *slog.Logger
	locks  keyed.Mutex // orders one record's claims and releases
	mu     sync.Mutex
	held   map[string]*heldLease
}

type heldLease struct {
	fence store.Fence
	refs  int
	// validUntil is when this replica stops trusting the lease (monotonic
	// clock): the send time of the claim or renewal that last extended it,
	// plus the TTL, minus the margin. The database's expiry is later: it
	// counts from when the write ran, after it was sent.
	validUntil time.Time
}

func newLeaseTable(db *store.DB, owner string, ttl time.Duration, log *slog.Logger) *leaseTable {
	return &leaseTable{db: db, owner: owner, ttl: ttl, margin: ttl / 5, log: log, held: map[string]*heldLease{}}
}

// acquire claims record id's lease (re-entrant within the replica). ok is
// false when another replica holds it.
func (t *leaseTable) acquire(ctx context.Context, id string) (f store.Fence, release func(), ok bool, err error) {
	unlock := t.locks.Lock(id)
	defer unlock()
	sent := time.Now()
	f, ok, err = t.db.ClaimLease(ctx, id, t.owner, t.ttl)
	if err != nil || !ok {
		return f, nil, false, err
	}
	t.mu.Lock()
	h := t.held[id]
	if h == nil {
		h = &heldLease{}
		t.held[id] = h
	}
	if h.fence != f {
		// A new epoch (the lease had lapsed): steps still holding the old
		// fence can no longer act (mayAct compares epochs).
		h.validUntil = time.Time{}
	}
	h.fence = f
	h.refs++
	if until := sent.Add(t.ttl - t.margin); until.After(h.validUntil) {
		h.validUntil = until
	}
	t.mu.Unlock()
	return f, func() { t.release(id) }, true, nil
}

// release ends one local use of record id's lease; the last gives the lease
// back to the database, so another replica may take the record at once.
func (t *leaseTable) release(id string) {
	unlock := t.locks.Lock(id)
	defer unlock()
	t.mu.Lock()
	h := t.held[id]
	if h == nil {
		t.mu.Unlock()
		return
	}
	h.refs--
	last := h.refs == 0
	if last {
		delete(t.held, id)
	}
	f := h.fence
	t.mu.Unlock()
	if !last {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.db.ReleaseLease(ctx, f); err != nil {
		// Harmless: the lease expires by itself (or this replica renews
		// and re-claims it with its next step of the record).
		t.log.Warn("giving a record's lease back failed; it expires by itself", "record", id, "err", err)
	}
}

// valid reports whether f is still a lease this replica may act under.
func (t *leaseTable) valid(f store.Fence) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.held[f.ID]
	return h != nil && h.fence == f && time.Now().Before(h.validUntil)
}

// renew extends every lease held, in one write. A renewal whose answer took
// longer than the margin extends nothing locally: some leases may have
// lapsed in the database before it ran.
func (t *leaseTable) renew(ctx context.Context) error {
	t.mu.Lock()
	ids := make([]string, 0, len(t.held))
	for id := range t.held {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	sent := time.Now()
	if _, err := t.db.RenewLeases(ctx, t.owner, ids, t.ttl); err != nil {
		return err
	}
	if took := time.Since(sent); took >= t.margin {
		return fmt.Errorf("the database took %s to renew the leases (more than the %s margin)", took.Round(time.Millisecond), t.margin)
	}
	until := sent.Add(t.ttl - t.margin)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.held {
		if h.validUntil.After(sent) { // a lapsed lease stays lapsed until claimed again
			h.validUntil = until
		}
	}
	return nil
}

// renewLoop renews the replica's leases every third of their TTL until ctx
// is done.
func (t *leaseTable) renewLoop(ctx context.Context) {
	tick := time.NewTicker(t.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := t.renew(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("renewing this replica's leases failed; records whose leases lapse are left to the other replicas",
				"replica", t.owner, "err", err)
		}
	}
}

// MayAct reports whether the step running under ctx may still make a
// provider call: nil when ctx carries no lease (nothing to lose) or one this
// replica still holds, store.ErrLeaseLost otherwise. Drivers call it before
// each side effect outside the database (the database's writes are fenced
// by themselves).
func (rc *Reconciler) MayAct(ctx context.Context) error {
	f, ok := store.FenceFrom(ctx)
	if !ok || rc.leases.valid(f) {
		return nil
	}
	return store.ErrLeaseLost
}

// withLease runs fn with record id's lease in its context, when this
// replica can claim it; ran is false (and fn not called) when another
// replica holds it. A lease lost during fn is not an error: the record is
// the other replica's now.
func (rc *Reconciler) withLease(ctx context.Context, id string, fn func(ctx context.Context) error) (ran bool, err error) {
	if f, ok := store.FenceFrom(ctx); ok && f.ID == id {
		return true, fn(ctx) // already held by this step
	}
	f, release, ok, err := rc.leases.acquire(ctx, id)
	if err != nil || !ok {
		return false, err
	}
	defer release()
	err = fn(store.WithFence(ctx, f))
	if errors.Is(err, store.ErrLeaseLost) {
		rc.log.Info("another replica took this record over; leaving it to that replica", "record", id, "replica", rc.leases.owner)
		return true, nil
	}
	return true, err
}

// A LeaseKeyed driver names the sandbox record whose lease covers one of its
// ids (a task environment's record), when its ids are not record ids.
type LeaseKeyed interface {
	// LeaseKey returns the record id to lease for id; "" steps id without
	// a lease (it has no record).
	LeaseKey(ctx context.Context, id string) (string, error)
}

// stepLeased is one step of id by r's driver, under the lease of its record:
// skipped when another replica holds it.
func (rc *Reconciler) stepLeased(ctx context.Context, r *run, id string, l Lane) error {
	key := id
	if k, ok := r.d.(LeaseKeyed); ok {
		var err error
		if key, err = k.LeaseKey(ctx, id); err != nil {
			return err
		}
		if key == "" {
			return r.d.Step(ctx, id, l)
		}
	}
	_, err := rc.withLease(ctx, key, func(ctx context.Context) error { return r.d.Step(ctx, id, l) })
	return err
}
