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

// billingColumns reads a record's accruals row (Version is that row's) with
// the record's id, kind and phase.
const billingColumns = `a.seq, s.id, a.org_id, s.kind, s.phase, a.cpu_count, a.memory_mb, a.runtime_ns, a.billed_ns, a.billed_micro,
	a.running_since, a.end_at, a.version`

const billingFrom = `accruals a JOIN sandboxes s ON s.seq = a.seq`

// The records with running time not yet billed are those running
// (accruals_running) and those stopped with a remainder to close out
// (accruals_closing, on a generated column so that a charge of a running
// record changes no indexed value: see migration 00010). These predicates
// are those indexes' own, so the planner can use them.
const (
	runningWhere = `running_since IS NOT NULL`
	closingWhere = `closing`
)

// unsettledWhere selects both, with columns prefixed by t ("" or "a.").
func unsettledWhere(t string) string {
	return `(` + t + runningWhere + ` OR ` + t + closingWhere + `)`
}

// billingQuerier runs a query: the reader pool or a transaction.
type billingQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryBillingRows runs query (which selects billingColumns) and appends
// its rows to out.
func queryBillingRows(ctx context.Context, q billingQuerier, out []BillingRow, query string, args ...any) ([]BillingRow, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
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
	q := `SELECT ` + billingColumns + ` FROM ` + billingFrom + ` WHERE ` + unsettledWhere("a.")
	var args []any
	if orgID != "" {
		q += ` AND a.org_id = ?`
		args = append(args, orgID)
	}
	return queryBillingRows(ctx, db.r, nil, q+` ORDER BY a.org_id, a.seq`, args...)
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
	return queryBillingRows(ctx, tx, make([]BillingRow, 0, len(ids)),
		`SELECT `+billingColumns+` FROM `+billingFrom+` WHERE s.id IN (`+placeholders(len(ids))+`) ORDER BY a.seq`, args...)
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

// Charge is a committed change of a record's billed figures, to publish to
// the record cache once its transaction commits (PublishCharges).
type Charge struct {
	Seq         int64
	ID          string // "" when unknown: the cache is searched by Seq
	BilledMicro int64
	BilledNs    int64
}

// PublishCharges patches the billed figures of cached copies of charged
// records (a charge changes the accruals row only, not the record's
// version). Billed figures only grow, so a copy already holding as much is
// left alone. Views of billed credits read the database (BilledRecords): a
// copy cached by another replica, or put back by a read racing this, may
// hold an earlier pass's figures.
func (db *DB) PublishCharges(ctx context.Context, charges []Charge) {
	if len(charges) == 0 {
		return
	}
	db.cache.mu.Lock()
	defer db.cache.mu.Unlock()
	patch := func(cur *Record, c Charge) {
		if cur.BilledNs > c.BilledNs || cur.BilledNs == c.BilledNs && cur.BilledMicro >= c.BilledMicro {
			return
		}
		// Cached records are never mutated (get and put clone), so the new
		// entry may share the old one's maps and slices.
		n := *cur
		n.BilledMicro, n.BilledNs = c.BilledMicro, c.BilledNs
		db.cache.byID[cur.ID] = &n
	}
	bySeq := map[int64]Charge{}
	for _, c := range charges {
		if c.ID == "" {
			bySeq[c.Seq] = c
		} else if cur, ok := db.cache.byID[c.ID]; ok {
			patch(cur, c)
		}
	}
	if len(bySeq) == 0 {
		return
	}
	for _, cur := range db.cache.byID {
		if c, ok := bySeq[cur.Seq]; ok {
			patch(cur, c)
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
	recs, err := db.queryRecords(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE s.id IN (`+placeholders(len(ids))+`)`, args...)
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
