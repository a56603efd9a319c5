package store

// The settle pass's common case in SQL: records running steadily (not past
// their end) of orgs whose balance covers everything they owe. The database
// computes their charges with the arithmetic of billing's cost and paidNs
// (integer division rounds down in SQLite and PostgreSQL alike) and writes
// them with one UPDATE of the narrow accruals rows: 10k records cost one
// statement instead of 10k row reads, computations in Go and conditional
// writes. Everything else (stopped records to close out, records past their
// end, orgs running dry, sums that could overflow) takes the row-by-row path
// (SlowUnsettledRecords, then billing's settlement).
//
// The statements number their parameters (?1 on SQLite, $1 on PostgreSQL):
// `now` appears a dozen times and is bound once.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// Rate is billing's rate formula (Rates.For) in nano-credits per second:
// SandboxSecond + CPUSecond×cpus + (GiBSecond×memoryMB + 512)/1024, with
// the defaults standing for a size of zero or less.
type Rate struct {
	SandboxSecond, CPUSecond, GiBSecond int64
	DefaultCPU, DefaultMemoryMB         int
}

// Positive reports whether every record's rate is at least one: only then
// does the fast path run (it divides by the rate).
func (r Rate) Positive() bool { return r.SandboxSecond > 0 || r.CPUSecond > 0 }

// maxProduct bounds running time × rate in the fast path (2^62 - 1), so no
// intermediate overflows a BIGINT; larger charges take the row path, whose
// Go arithmetic is 128-bit.
const maxProduct = 4611686018427387903

// fastSQL holds the fast path's expressions over an accruals row.
type fastSQL struct {
	rate, runtime, due string
	fast               string // the row is charged by the fast path (if due > 0)
	least              string // two-argument minimum
	orgIn              string // org_id is in parameter 2 (a list of orgs)
}

// sqlFor builds the expressions for rate r, with columns prefixed by t (""
// or "a.") and parameter 1 the settlement's moment in Unix nanoseconds.
func sqlFor(r Rate, pg bool, t string) fastSQL {
	now := "?1"
	f := fastSQL{least: "min", orgIn: t + `org_id IN (SELECT value FROM json_each(?2))`}
	if pg {
		now = "$1"
		f.least, f.orgIn = "LEAST", t+`org_id = ANY(CAST($2 AS TEXT[]))`
	}
	f.rate = fmt.Sprintf(`(%[1]d + %[2]d * CASE WHEN %[6]scpu_count <= 0 THEN %[3]d ELSE %[6]scpu_count END + (%[4]d * CASE WHEN %[6]smemory_mb <= 0 THEN %[5]d ELSE %[6]smemory_mb END + 512) / 1024)`,
		r.SandboxSecond, r.CPUSecond, r.DefaultCPU, r.GiBSecond, r.DefaultMemoryMB, t)
	now = `CAST(` + now + ` AS BIGINT)`
	f.runtime = `(` + t + `runtime_ns + ` + now + ` - ` + t + `running_since)`
	delta := `(` + f.runtime + ` - ` + t + `billed_ns)`
	f.due = `(` + delta + ` * ` + f.rate + ` / 1000000000000)`
	f.fast = `(` + t + runningWhere + ` AND ` + t + `running_since < ` + now + ` AND (` + t + `end_at IS NULL OR ` + t + `end_at >= ` + now + `) AND ` +
		delta + ` > 0 AND ` + delta + fmt.Sprintf(` <= %d / `, maxProduct) + f.rate + `)`
	return f
}

// orgsArg is parameter 2: the orgs, as the dialect's statement reads them.
func orgsArg(orgs []string, pg bool) any {
	if pg {
		if orgs == nil {
			orgs = []string{}
		}
		return orgs
	}
	b, _ := json.Marshal(orgs)
	return string(b)
}

// FastSum is what the fast path owes (or charged) an org.
type FastSum struct {
	Records int
	Micro   int64
}

// RunningOrgsTx lists the orgs with a running record (an index-only walk of
// accruals_running).
func RunningOrgsTx(ctx context.Context, tx *sql.Tx) ([]string, error) {
	return QueryStrings(ctx, tx, `SELECT DISTINCT org_id FROM accruals WHERE `+runningWhere)
}

// FastDueTx sums, per org, the charges the fast path would make at now.
func FastDueTx(ctx context.Context, tx *sql.Tx, now int64, r Rate) (map[string]FastSum, error) {
	f := sqlFor(r, isPostgresTx(tx), "")
	// Parameter 2 is unused here; SQLite and PostgreSQL both want every
	// numbered parameter bound, so it is named in a condition that holds.
	rows, err := tx.QueryContext(ctx, `SELECT org_id, COUNT(*), CAST(SUM(`+f.due+`) AS BIGINT) FROM accruals
		WHERE `+f.fast+` AND `+f.due+` > 0 AND (`+f.orgIn+` OR TRUE) GROUP BY org_id`, now, orgsArg(nil, isPostgresTx(tx)))
	if err != nil {
		return nil, err
	}
	return scanFastSums(rows)
}

func scanFastSums(rows *sql.Rows) (map[string]FastSum, error) {
	defer rows.Close()
	out := map[string]FastSum{}
	for rows.Next() {
		var org string
		var s FastSum
		if err := rows.Scan(&org, &s.Records, &s.Micro); err != nil {
			return nil, err
		}
		out[org] = s
	}
	return out, rows.Err()
}

// FastChargeTx charges the fast-path records of orgs at now and returns,
// per org, what it charged. due is FastDueTx's answer earlier in tx. On
// SQLite the transaction holds the write lock from its start, so the UPDATE
// charges exactly that. On PostgreSQL a record may have moved in between (a
// concurrent move waits for, or is waited on by, this statement, which then
// re-reads the row), so the sums are taken from the rows written.
//
// The record cache is not told: a charge leaves the record's version alone,
// so cached copies keep the billed figures of their version, on every
// replica alike (see Record.BilledMicro). Views read them fresh
// (WithBilled). Patching 10k cached copies cost more than the pass.
func FastChargeTx(ctx context.Context, tx *sql.Tx, now int64, r Rate, orgs []string, due map[string]FastSum) (map[string]FastSum, error) {
	out := make(map[string]FastSum, len(orgs))
	if len(orgs) == 0 {
		return out, nil
	}
	pg := isPostgresTx(tx)
	f := sqlFor(r, pg, "")
	update := `UPDATE accruals SET last_charge_micro = ` + f.due + `, billed_micro = billed_micro + ` + f.due + `,
		billed_ns = ` + f.least + `(billed_ns + ` + f.due + ` * 1000000000000 / ` + f.rate + `, ` + f.runtime + `), version = version + 1
		WHERE ` + f.orgIn + ` AND ` + f.fast + ` AND ` + f.due + ` > 0`
	if !pg {
		if _, err := tx.ExecContext(ctx, update, now, orgsArg(orgs, pg)); err != nil {
			return nil, err
		}
		for _, o := range orgs {
			if s, ok := due[o]; ok {
				out[o] = s
			}
		}
		return out, nil
	}
	rows, err := tx.QueryContext(ctx, `WITH u AS (`+update+` RETURNING org_id, last_charge_micro)
		SELECT org_id, COUNT(*), CAST(SUM(last_charge_micro) AS BIGINT) FROM u GROUP BY org_id`, now, orgsArg(orgs, pg))
	if err != nil {
		return nil, err
	}
	return scanFastSums(rows)
}

// SlowUnsettledRecords returns the billing rows of unsettled records the
// fast path does not charge at now: stopped records with a remainder, and
// running ones past their end or whose product would overflow (and those
// with nothing due). Ordered by org then seq.
func (db *DB) SlowUnsettledRecords(ctx context.Context, now int64, r Rate) ([]BillingRow, error) {
	pg := db.dialect == Postgres
	f := sqlFor(r, pg, "a.")
	// Parameter 2 is unused (see FastDueTx).
	return queryBillingRows(ctx, db.r, nil, `SELECT `+billingColumns+` FROM `+billingFrom+` WHERE (a.`+closingWhere+`
		OR a.`+runningWhere+` AND NOT COALESCE(`+f.fast+`, FALSE)) AND (`+f.orgIn+` OR TRUE) ORDER BY a.org_id, a.seq`, now, orgsArg(nil, pg))
}

// UnsettledRecordsOf returns the billing rows of the unsettled records of
// orgs, ordered by org then seq.
func (db *DB) UnsettledRecordsOf(ctx context.Context, orgs []string) ([]BillingRow, error) {
	var out []BillingRow
	for start := 0; start < len(orgs); start += 500 {
		chunk := orgs[start:min(start+500, len(orgs))]
		args := make([]any, len(chunk))
		for i, o := range chunk {
			args[i] = o
		}
		var err error
		if out, err = queryBillingRows(ctx, db.r, out, `SELECT `+billingColumns+` FROM `+billingFrom+` WHERE `+unsettledWhere("a.")+`
			AND a.org_id IN (`+placeholders(len(chunk))+`) ORDER BY a.org_id, a.seq`, args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}
