package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Leases share the records' work among replicas (DESIGN.md "Replicas and
// leases"): a replica drives a record only while it holds the record's
// lease, and every phase change it makes meanwhile carries the lease's
// fence, so once another replica took the record over (after the lease
// expired: the holder died, froze or lost the database) the old holder's
// writes change no row.
//
// Expiry is judged on one clock, so replicas' clocks may disagree: the
// database's on PostgreSQL, the process's on SQLite (one process per file).

// Fence is a held lease: record ID held by Owner since the claim that
// numbered it Epoch. Writes carrying it apply only while the record's lease
// still has that owner and epoch.
type Fence struct {
	ID    string
	Owner string
	Epoch int64
}

// ErrLeaseLost is returned by a fenced write when the record's lease has
// another owner or epoch: another replica took the record over. It does not
// match ErrConflict on purpose: a caller that re-reads and decides again on
// a conflict must stop instead, the record is no longer its to drive.
var ErrLeaseLost = errors.New("the lease on this record was lost to another replica")

// leaseNow is the SQL for "now" in Unix nanoseconds on the clock that
// judges expiry, and its argument (none on PostgreSQL, whose clock it reads).
func (db *DB) leaseNow() (string, []any) {
	if db.dialect == Postgres {
		// clock_timestamp, not now(): now() is the transaction's start.
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000 AS BIGINT)`, nil
	}
	return `?`, []any{time.Now().UnixNano()}
}

// ClaimLease takes record id's lease for owner for ttl, when nobody holds
// it, its holder's lease expired, or owner holds it already (re-entrant:
// the epoch stays while owner's lease is unexpired, since nobody can have
// acted in between; a claim after expiry counts as a new hand-over). It is
// one conditional write: two replicas claiming at once serialise on the
// row and one of them gets false. ok is false, with no error, when another
// replica holds the lease or the record does not exist.
func (db *DB) ClaimLease(ctx context.Context, id, owner string, ttl time.Duration) (f Fence, ok bool, err error) {
	now, args := db.leaseNow()
	// Each occurrence of now binds its own argument on SQLite.
	q := `UPDATE sandboxes SET
		lease_epoch = CASE WHEN lease_owner = ? AND lease_expires > ` + now + ` THEN lease_epoch ELSE lease_epoch + 1 END,
		lease_owner = ?, lease_expires = ` + now + ` + ?
		WHERE id = ? AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires <= ` + now + `)
		RETURNING lease_epoch`
	a := append(append([]any{owner}, args...), owner)
	a = append(append(a, args...), ttl.Nanoseconds(), id, owner)
	a = append(a, args...)
	err = db.w.QueryRowContext(ctx, q, a...).Scan(&f.Epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return Fence{}, false, nil
	}
	if err != nil {
		return Fence{}, false, fmt.Errorf("claiming the lease on record %s: %w", id, err)
	}
	return Fence{ID: id, Owner: owner, Epoch: f.Epoch}, true, nil
}

// RenewLeases extends by ttl the unexpired leases owner holds among records
// ids, in one write per 500 ids, and returns how many it extended. An
// expired lease is not renewed even if nobody took it yet: its holder must
// claim it again (a new epoch), since another replica may have acted on the
// record meanwhile. Naming the records (rather than every lease of owner)
// keeps a lease whose release failed from living as long as its owner.
func (db *DB) RenewLeases(ctx context.Context, owner string, ids []string, ttl time.Duration) (int, error) {
	total := 0
	for chunk := range slices.Chunk(ids, 500) {
		now, args := db.leaseNow()
		a := append(append([]any{}, args...), ttl.Nanoseconds(), owner)
		for _, id := range chunk {
			a = append(a, id)
		}
		res, err := db.w.ExecContext(ctx, `UPDATE sandboxes SET lease_expires = `+now+` + ?
			WHERE lease_owner = ? AND id IN (`+placeholders(len(chunk))+`) AND lease_expires > `+now, append(a, args...)...)
		if err != nil {
			return total, fmt.Errorf("renewing the leases of %s: %w", owner, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += int(n)
	}
	return total, nil
}

// ReleaseLease gives f's record back (another replica may claim it at
// once), if f is still its lease. The epoch stays: the next claim numbers
// the next hand-over.
func (db *DB) ReleaseLease(ctx context.Context, f Fence) error {
	_, err := db.w.ExecContext(ctx, `UPDATE sandboxes SET lease_owner = NULL, lease_expires = NULL
		WHERE id = ? AND lease_owner = ? AND lease_epoch = ?`, f.ID, f.Owner, f.Epoch)
	if err != nil {
		return fmt.Errorf("releasing the lease on record %s: %w", f.ID, err)
	}
	return nil
}

// ReleaseAllLeases clears every lease. Only for a database one process
// uses (SQLite): at its start-up no other holder can be alive, so the
// records its previous run held need not wait for their leases to expire.
func (db *DB) ReleaseAllLeases(ctx context.Context) error {
	_, err := db.w.ExecContext(ctx, `UPDATE sandboxes SET lease_owner = NULL, lease_expires = NULL WHERE lease_owner IS NOT NULL`)
	return err
}

// LeaseOf reads record id's lease as stored (owner "" when nobody holds
// it), for tests and diagnostics.
func (db *DB) LeaseOf(ctx context.Context, id string) (owner string, epoch int64, expires time.Time, err error) {
	var o sql.NullString
	var exp sql.NullInt64
	err = db.w.QueryRowContext(ctx, `SELECT lease_owner, lease_epoch, lease_expires FROM sandboxes WHERE id = ?`, id).Scan(&o, &epoch, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	return o.String, epoch, TimeFromNanos(exp), err
}

type fenceKey struct{}

// WithFence returns ctx carrying f: TransitionTx of f's record under it
// applies only while f is still the record's lease (ErrLeaseLost otherwise).
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence ctx carries, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// fenceFor returns the SQL condition and arguments that fence a write of
// record id under ctx ("" when ctx carries no fence for id).
func fenceFor(ctx context.Context, id string) (string, []any) {
	f, ok := FenceFrom(ctx)
	if !ok || f.ID != id {
		return "", nil
	}
	return ` AND lease_owner = ? AND lease_epoch = ?`, []any{f.Owner, f.Epoch}
}

// fenceLost tells, after a fenced write of record id changed no row, whether
// the fence is why (ErrLeaseLost) or the version (ErrConflict).
func fenceLost(ctx context.Context, tx *sql.Tx, id string) error {
	f, _ := FenceFrom(ctx)
	var owner sql.NullString
	var epoch int64
	if err := tx.QueryRowContext(ctx, `SELECT lease_owner, lease_epoch FROM sandboxes WHERE id = ?`, id).Scan(&owner, &epoch); err != nil {
		return fmt.Errorf("reading the lease of record %s: %w", id, err)
	}
	if owner.String != f.Owner || epoch != f.Epoch {
		return ErrLeaseLost
	}
	return ErrConflict
}

// CheckFenceTx fences a write of a table other than sandboxes (a task
// environment's) by its record's lease: ErrLeaseLost when ctx carries a
// fence for record id that is no longer the record's lease. On PostgreSQL
// it locks the record's row until tx ends, so a take-over waits for this
// write instead of slipping between the check and the commit.
func CheckFenceTx(ctx context.Context, tx *sql.Tx, id string) error {
	if cond, _ := fenceFor(ctx, id); cond == "" {
		return nil
	}
	q := `SELECT lease_owner, lease_epoch FROM sandboxes WHERE id = ?`
	if isPostgresTx(tx) {
		q += ` FOR UPDATE`
	}
	f, _ := FenceFrom(ctx)
	var owner sql.NullString
	var epoch int64
	if err := tx.QueryRowContext(ctx, q, id).Scan(&owner, &epoch); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil // no record: nothing holds a lease on it
		}
		return fmt.Errorf("reading the lease of record %s: %w", id, err)
	}
	if owner.String != f.Owner || epoch != f.Epoch {
		return ErrLeaseLost
	}
	return nil
}

// FreshRecord reads record id from the database, not the cache, and
// refreshes the cache with it. A replica that just claimed a record decides
// from it: another replica may have written the record a moment ago, and
// this process's cache may not have heard yet; a decision from a stale copy
// would call the provider for a phase the record has left.
func (db *DB) FreshRecord(ctx context.Context, id string) (*Record, error) {
	r, err := scanRecord(db.r.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE s.id = ?`, id))
	if err == nil {
		db.cache.put(r)
	}
	return r, err
}
