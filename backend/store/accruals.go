package store

// A record's billing state lives in its accruals row (migration 00010): the
// columns the charge arithmetic reads, mirrored from the sandboxes row, and
// what was billed, which only settlement writes. Two writers keep the mirror:
// InsertRecordTx, and the transition gate when a move changes a mirrored
// column, each in the transaction that writes the sandboxes row. On
// PostgreSQL the gate reads both rows FOR UPDATE (recordFrom is a join), so a
// charge and a move of one record never interleave.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// accrual is what a record's accruals row mirrors, compared by the gate.
type accrual struct {
	orgID                 string
	cpu, mem              int
	runtimeNs, since, end int64
	billedMicro, billedNs int64
}

func nanosOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func accrualOf(r *Record) accrual {
	return accrual{orgID: r.OrgID, cpu: r.CPUCount, mem: r.MemoryMB, runtimeNs: r.RuntimeNs,
		since: nanosOrZero(r.RunningSince), end: nanosOrZero(r.EndAt), billedMicro: r.BilledMicro, billedNs: r.BilledNs}
}

func insertAccrualTx(ctx context.Context, tx *sql.Tx, r *Record) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO accruals (seq, org_id, cpu_count, memory_mb, runtime_ns, running_since, end_at,
		billed_micro, billed_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.Seq, r.OrgID, r.CPUCount, r.MemoryMB, r.RuntimeNs,
		NanosOrNull(r.RunningSince), NanosOrNull(r.EndAt), r.BilledMicro, r.BilledNs)
	return err
}

// ErrBilledBySettlement refuses a transition that changed what a record was
// billed: settlement (backend/billing) alone moves credits, together with
// the org's debit.
var ErrBilledBySettlement = errors.New("a record's billed credits are written by settlement only")

// mirrorAccrualTx writes r's accruals row when the move changed a column it
// mirrors (most moves change none: a pause, a stop and a TTL change do).
func mirrorAccrualTx(ctx context.Context, tx *sql.Tx, before accrual, r *Record) error {
	after := accrualOf(r)
	if after.billedMicro != before.billedMicro || after.billedNs != before.billedNs {
		return ErrBilledBySettlement
	}
	if after == before {
		return nil
	}
	res, err := tx.ExecContext(ctx, `UPDATE accruals SET org_id = ?, cpu_count = ?, memory_mb = ?, runtime_ns = ?,
		running_since = ?, end_at = ?, version = version + 1 WHERE seq = ?`, r.OrgID, r.CPUCount, r.MemoryMB, r.RuntimeNs,
		NanosOrNull(r.RunningSince), NanosOrNull(r.EndAt), r.Seq)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("the accruals row of record seq %d is missing", r.Seq)
	}
	return nil
}

// BilledRecords returns what the records of seqs were billed, read from the
// database rather than the record cache: a settle pass leaves records'
// versions alone, so a cached copy (here or on another replica) may hold an
// earlier pass's figures. Views of billed credits read them here.
func (db *DB) BilledRecords(ctx context.Context, seqs []int64) (map[int64]Billed, error) {
	out := make(map[int64]Billed, len(seqs))
	for chunk := range slices.Chunk(seqs, 500) {
		args := make([]any, len(chunk))
		for i, s := range chunk {
			args[i] = s
		}
		got, err := QueryAll(ctx, db.r, func(s Scanner) (Billed, error) {
			var b Billed
			return b, s.Scan(&b.seq, &b.Micro, &b.Ns)
		}, `SELECT seq, billed_micro, billed_ns FROM accruals WHERE seq IN (`+placeholders(len(chunk))+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, b := range got {
			out[b.seq] = b
		}
	}
	return out, nil
}

// Billed is what a record was billed so far.
type Billed struct {
	Micro int64 // micro-credits
	Ns    int64 // running time they paid
	seq   int64
}

// WithBilled returns copies of recs carrying the billed figures the database
// holds now (BilledRecords); recs themselves (which may be shared with the
// cache) are not modified. The copies share the records' maps and slices.
func (db *DB) WithBilled(ctx context.Context, recs ...*Record) ([]*Record, error) {
	seqs := make([]int64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	billed, err := db.BilledRecords(ctx, seqs)
	if err != nil {
		return nil, err
	}
	out := make([]*Record, len(recs))
	for i, r := range recs {
		n := *r
		if b, ok := billed[r.Seq]; ok {
			n.BilledMicro, n.BilledNs = b.Micro, b.Ns
		}
		out[i] = &n
	}
	return out, nil
}

// GetOrgRecordBilled is GetOrgRecord with the billed figures the database
// holds now (see WithBilled), for views that show them.
func (db *DB) GetOrgRecordBilled(ctx context.Context, orgID, id string) (*Record, error) {
	r, err := db.GetOrgRecord(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	fresh, err := db.WithBilled(ctx, r)
	if err != nil {
		return nil, err
	}
	return fresh[0], nil
}

// BillingRowsOf reads record id's billing row (as BillingRowsTx, outside a
// transaction).
func (db *DB) BillingRowsOf(ctx context.Context, id string) (BillingRow, error) {
	got, err := queryBillingRows(ctx, db.r, nil, `SELECT `+billingColumns+` FROM `+billingFrom+` WHERE s.id = ?`, id)
	if err != nil {
		return BillingRow{}, err
	}
	if len(got) == 0 {
		return BillingRow{}, ErrNotFound
	}
	return got[0], nil
}
