package store

// Billing queries used by the ledger (backend/billing): settlement reads a
// light projection of the sandbox rows (no JSON decoding), charges records
// and debits org balances inside one caller transaction.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// BillingRow is the part of a record settlement needs.
type BillingRow struct {
	Seq          int64
	ID           string
	OrgID        string
	Kind         string
	Phase        sandbox.Phase
	CPUCount     int
	MemoryMB     int
	RuntimeNs    int64
	BilledNs     int64
	BilledMicro  int64
	RunningSince time.Time
	EndAt        time.Time
	Version      int64
}

// RuntimeAt is the total running time up to now (as Record.RuntimeAt).
func (b *BillingRow) RuntimeAt(now time.Time) time.Duration {
	return runtimeAt(b.RuntimeNs, b.RunningSince, b.EndAt, now)
}

const billingColumns = `seq, id, org_id, kind, phase, cpu_count, memory_mb, runtime_ns, billed_ns, billed_micro, running_since, end_at, version`

// UnsettledWhere selects records with running time not yet billed: those
// accruing now and those whose folded runtime exceeds the billed time. The
// column unsettled is generated from exactly that (migration 00009: an
// index naming billed_ns made every charge rewrite all of the row's index
// entries on PostgreSQL); the ledger's partial index uses this expression.
const UnsettledWhere = `unsettled`

type rowsScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

func scanBillingRows(rows rowsScanner, out []BillingRow) ([]BillingRow, error) {
	defer rows.Close()
	for rows.Next() {
		var b BillingRow
		var since, endAt sql.NullInt64
		if err := rows.Scan(&b.Seq, &b.ID, &b.OrgID, &b.Kind, &b.Phase, &b.CPUCount, &b.MemoryMB,
			&b.RuntimeNs, &b.BilledNs, &b.BilledMicro, &since, &endAt, &b.Version); err != nil {
			return nil, err
		}
		b.RunningSince, b.EndAt = TimeFromNanos(since), TimeFromNanos(endAt)
		out = append(out, b)
	}
	return out, rows.Err()
}

// UnsettledRecords returns the billing rows of every record with running
// time not yet billed (all orgs, ordered by org then seq). orgID "" means
// every org.
func (db *DB) UnsettledRecords(ctx context.Context, orgID string) ([]BillingRow, error) {
	q := `SELECT ` + billingColumns + ` FROM sandboxes WHERE ` + UnsettledWhere
	var args []any
	if orgID != "" {
		q += ` AND org_id = ?`
		args = append(args, orgID)
	}
	rows, err := db.r.QueryContext(ctx, q+` ORDER BY org_id, seq`, args...)
	if err != nil {
		return nil, err
	}
	return scanBillingRows(rows, nil)
}

// BillingRowsTx reads the billing rows of ids inside tx (the settlement's
// own consistent view).
func BillingRowsTx(ctx context.Context, tx *sql.Tx, ids []string) ([]BillingRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+billingColumns+` FROM sandboxes WHERE id IN (`+placeholders(len(ids))+`) ORDER BY seq`, args...)
	if err != nil {
		return nil, err
	}
	return scanBillingRows(rows, make([]BillingRow, 0, len(ids)))
}

// OrgCreditsTx reads an org's balance inside tx.
func OrgCreditsTx(ctx context.Context, tx *sql.Tx, orgID string) (int64, error) {
	var c int64
	err := tx.QueryRowContext(ctx, `SELECT credits_micro FROM orgs WHERE id = ?`, orgID).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return c, err
}

// Charge is a committed change of a record's billing fields, to publish to
// the record cache once its transaction commits (PublishCharges).
type Charge struct {
	ID          string
	Version     int64 // the version the charge wrote
	BilledMicro int64
	BilledNs    int64
}

// PublishCharges brings the record cache up to date with committed charges:
// a cached copy one version behind is patched in place; any other is
// dropped, and no copy older than the charge may be put back (a read racing
// this). An uncached record is not loaded: a settle pass charges every
// running record, and reading them all in full (JSON included) to fill the
// cache cost more than the pass's charges; the next GetRecord reads it.
func (db *DB) PublishCharges(ctx context.Context, charges []Charge) {
	db.cache.mu.Lock()
	defer db.cache.mu.Unlock()
	for _, c := range charges {
		cur, ok := db.cache.byID[c.ID]
		switch {
		case ok && cur.Version >= c.Version:
			// a later write is already published
		case ok && cur.Version == c.Version-1:
			// Cached records are never mutated (get and put clone), so the
			// new entry may share the old one's maps and slices.
			n := *cur
			n.BilledMicro, n.BilledNs, n.Version = c.BilledMicro, c.BilledNs, c.Version
			db.cache.byID[c.ID] = &n
		default:
			db.cache.committedLocked(c.ID, c.Version)
		}
	}
}

// ErrInsufficientCredits is returned by DebitOrgTx when the balance does not
// cover the debit (the caller computed the debit from a stale balance).
var ErrInsufficientCredits = errors.New("the balance does not cover the debit")

// DebitOrgTx takes micro from an org's balance and returns the new balance;
// it never lets the balance go below zero.
func DebitOrgTx(ctx context.Context, tx *sql.Tx, orgID string, micro int64) (int64, error) {
	if micro < 0 {
		return 0, fmt.Errorf("negative debit %d", micro)
	}
	var bal int64
	err := tx.QueryRowContext(ctx, `UPDATE orgs SET credits_micro = credits_micro - ? WHERE id = ? AND credits_micro >= ? RETURNING credits_micro`,
		micro, orgID, micro).Scan(&bal)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrInsufficientCredits
	}
	return bal, err
}

// LiveRecordIDsTx lists an org's records in sandbox.Live (those a kill for
// lack of credits moves to stopping), inside tx.
func LiveRecordIDsTx(ctx context.Context, tx *sql.Tx, orgID string) ([]string, error) {
	return QueryStrings(ctx, tx, `SELECT id FROM sandboxes WHERE org_id = ? AND phase IN (`+SQLList(sandbox.Live)+`) ORDER BY seq`, orgID)
}

// BrokeOrgs lists the orgs whose balance is zero (or less) while some of
// their records are still live.
func (db *DB) BrokeOrgs(ctx context.Context) ([]string, error) {
	return QueryStrings(ctx, db.r, `SELECT o.id FROM orgs o WHERE o.credits_micro <= 0 AND EXISTS (
		SELECT 1 FROM sandboxes s WHERE s.org_id = o.id AND s.phase IN (`+SQLList(sandbox.Live)+`))`)
}

// GrantCreditsMax adds micro credits to the org named name unless the new
// balance would exceed maxMicro; it returns the new balance. An unknown org
// is ErrNotFound; a balance over the cap is ErrBalanceCap.
func (db *DB) GrantCreditsMax(ctx context.Context, name string, micro, maxMicro int64) (int64, error) {
	if micro > maxMicro {
		return 0, ErrBalanceCap
	}
	var bal int64
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		// The cap is checked by the UPDATE itself, not by a read before it:
		// on PostgreSQL (READ COMMITTED) two concurrent grants could each
		// read the old balance and together pass the cap.
		err := tx.QueryRowContext(ctx, `UPDATE orgs SET credits_micro = credits_micro + ? WHERE name = ? AND credits_micro <= ?
			RETURNING credits_micro`, micro, name, maxMicro-micro).Scan(&bal)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM orgs WHERE name = ?`, name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("organization %q does not exist: %w", name, ErrNotFound)
		}
		return ErrBalanceCap
	})
	return bal, err
}

// ErrBalanceCap refuses a grant that would overflow the balance cap.
var ErrBalanceCap = errors.New("the balance would exceed its cap")

// GetRecords reads the records of ids (missing ids are absent from the map).
func (db *DB) GetRecords(ctx context.Context, ids []string) (map[string]*Record, error) {
	out := make(map[string]*Record, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	recs, err := db.queryRecords(ctx, `SELECT `+recordColumns+` FROM sandboxes WHERE id IN (`+placeholders(len(ids))+`)`, args...)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		out[r.ID] = r
	}
	return out, nil
}

// UsageTotals sums an org's folded runtime (RuntimeNs, excluding the part of
// running records since RunningSince) and sessions. (PostgreSQL's SUM of a
// BIGINT is NUMERIC; the casts keep both sums integers on either database.)
func (db *DB) UsageTotals(ctx context.Context, orgID string) (runtimeNs int64, sessions int64, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(runtime_ns), 0) AS BIGINT), CAST(COALESCE(SUM(sessions), 0) AS BIGINT) FROM sandboxes WHERE org_id = ?`, orgID).
		Scan(&runtimeNs, &sessions)
	return
}

// UsageSpan is what the current-period usage needs of one record.
type UsageSpan struct {
	RuntimeNs    int64
	RunningSince time.Time
	Timeline     []TimelineEntry
}

// UsageSpans returns, for an org's records that ran and were not killed
// before since, their runtime and timeline (to split runtime by period).
func (db *DB) UsageSpans(ctx context.Context, orgID string, since time.Time) ([]UsageSpan, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT runtime_ns, running_since, timeline FROM sandboxes WHERE org_id = ?
		AND (killed_at IS NULL OR killed_at >= ?) AND (running_since IS NOT NULL OR runtime_ns > 0)`, orgID, since.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []UsageSpan
	for rows.Next() {
		var u UsageSpan
		var rs sql.NullInt64
		var tl string
		if err := rows.Scan(&u.RuntimeNs, &rs, &tl); err != nil {
			return nil, err
		}
		u.RunningSince = TimeFromNanos(rs)
		if err := json.Unmarshal([]byte(tl), &u.Timeline); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}
