package billing

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// chargeRounds bounds how often a batch's records that changed under it
// are re-read and charged again within one transaction; a record that still
// moves is left for the next pass (nothing was charged for it).
const chargeRounds = 3

// orgState is an org's balance within one settlement transaction.
type orgState struct {
	balance int64 // what is left after the charges applied (and, while planning, planned)
	debit   int64 // the sum of the charges applied
	touched bool  // some record of the org was charged (or closed out)
	dry     bool  // a record was charged less than it owed: the rest go one by one
}

// settlement is one transaction's work: charges computed in Go (the exact
// integer arithmetic of cost and paidNs), written in set-based statements,
// each row conditional on the version it was computed from.
type settlement struct {
	s       *Service
	tx      *sql.Tx
	now     time.Time
	orgs    map[string]*orgState
	tail    []store.BillingRow // records of orgs running dry, settled one at a time
	res     SettleResult
	charges []store.Charge
	killed  []*store.Record
}

// run settles rows (Version < 0: read them first) and debits their orgs.
func (st *settlement) run(ctx context.Context, rows []store.BillingRow) error {
	batch, err := st.fresh(ctx, rows)
	if err != nil {
		return err
	}
	if err := st.lockOrgs(ctx, batch); err != nil {
		return err
	}
	for round := 0; round < chargeRounds && len(batch) > 0; round++ {
		if batch, err = st.chargeBatch(ctx, batch); err != nil {
			return err
		}
	}
	for i := range st.tail {
		if err := st.chargeOne(ctx, st.tail[i]); err != nil {
			return err
		}
	}
	return st.debit(ctx)
}

// fresh re-reads the rows given without a version (a single Settle).
func (st *settlement) fresh(ctx context.Context, rows []store.BillingRow) ([]store.BillingRow, error) {
	var ids []string
	for _, b := range rows {
		if b.Version < 0 {
			ids = append(ids, b.ID)
		}
	}
	if len(ids) == 0 {
		return rows, nil
	}
	read, err := store.BillingRowsTx(ctx, st.tx, ids)
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(slices.Clone(rows), func(b store.BillingRow) bool { return b.Version < 0 })
	return append(out, read...), nil
}

// lockOrgs reads the balances of the rows' orgs and keeps their rows locked
// (on PostgreSQL) until the transaction ends, in one order for every
// settler so that two never wait on each other.
func (st *settlement) lockOrgs(ctx context.Context, rows []store.BillingRow) error {
	var ids []string
	for _, b := range rows {
		ids = append(ids, b.OrgID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	bal, err := store.OrgsCreditsForUpdateTx(ctx, st.tx, ids)
	if err != nil {
		return err
	}
	for id, b := range bal {
		st.orgs[id] = &orgState{balance: max(b, 0)}
	}
	return nil
}

// plan computes what b owes at now and what o can pay: the order to write
// (ok false: nothing to write) and whether it is short of what is due.
func (st *settlement) plan(b *store.BillingRow, o *orgState) (order store.ChargeOrder, short, ok bool) {
	runtime := int64(b.RuntimeAt(st.now))
	delta := runtime - b.BilledNs
	if delta <= 0 {
		return order, false, false
	}
	rate := st.s.rates.For(b.CPUCount, b.MemoryMB)
	due := cost(delta, rate)
	charge := min(due, o.balance)
	var billed int64
	switch {
	case charge < due, rate == 0, b.RunningSince.IsZero():
		// Out of credits: bill what is left and close the period (the rest
		// is not owed twice). Stopped: close out, dropping a remainder below
		// one micro-credit.
		billed = runtime
	default:
		billed = min(b.BilledNs+paidNs(due, rate), runtime)
	}
	if charge == 0 && billed == b.BilledNs {
		return order, false, false
	}
	return store.ChargeOrder{Row: b, Micro: charge, BilledNs: billed}, charge < due, true
}

// chargeBatch charges rows in set-based statements and returns the rows
// that changed under it, re-read. An org's records from its first one that
// cannot be paid in full go to the tail: what they get depends on exactly
// what the others paid.
func (st *settlement) chargeBatch(ctx context.Context, rows []store.BillingRow) ([]store.BillingRow, error) {
	orders := make([]store.ChargeOrder, 0, len(rows))
	for i := range rows {
		b := &rows[i]
		o := st.orgs[b.OrgID]
		if o == nil {
			continue // no org to bill: leave the record as it is
		}
		if o.dry {
			st.tail = append(st.tail, *b)
			continue
		}
		order, short, ok := st.plan(b, o)
		switch {
		case short:
			o.dry = true
			st.tail = append(st.tail, *b)
		case ok:
			o.balance -= order.Micro // planned; given back below if not applied
			orders = append(orders, order)
		}
	}
	applied, charges, err := store.ApplyChargesTx(ctx, st.tx, orders)
	if err != nil {
		return nil, err
	}
	var moved []string
	for i, o := range orders {
		org := st.orgs[o.Row.OrgID]
		if !applied[i] {
			org.balance += o.Micro
			moved = append(moved, o.Row.ID)
			continue
		}
		st.applied(org, o.Micro)
	}
	st.charges = append(st.charges, charges...)
	if len(moved) == 0 {
		return nil, nil
	}
	return store.BillingRowsTx(ctx, st.tx, moved)
}

// chargeOne charges one record of an org running dry, against the balance
// left by every charge applied before it.
func (st *settlement) chargeOne(ctx context.Context, b store.BillingRow) error {
	for attempt := 0; attempt < chargeRounds; attempt++ {
		if attempt > 0 {
			fresh, err := store.BillingRowsTx(ctx, st.tx, []string{b.ID})
			if err != nil || len(fresh) == 0 {
				return err // gone: nothing to bill
			}
			b = fresh[0]
		}
		o := st.orgs[b.OrgID]
		order, _, ok := st.plan(&b, o)
		if !ok {
			return nil
		}
		applied, charges, err := store.ApplyChargesTx(ctx, st.tx, []store.ChargeOrder{order})
		if err != nil {
			return err
		}
		if applied[0] {
			o.balance -= order.Micro
			st.applied(o, order.Micro)
			st.charges = append(st.charges, charges...)
			return nil
		}
	}
	return nil // still changing: the next pass settles it
}

func (st *settlement) applied(o *orgState, micro int64) {
	o.debit += micro
	o.touched = true
	st.res.Records++
	st.res.Micro += micro
}

// debit takes from each org exactly the sum charged to its records (never
// below zero: the decrement is conditional) and, for every org charged down
// to zero, sends its live records to stopping.
func (st *settlement) debit(ctx context.Context) error {
	ids := make([]string, 0, len(st.orgs))
	for id := range st.orgs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, org := range ids {
		o := st.orgs[org]
		if o.debit > 0 {
			bal, err := store.DebitOrgTx(ctx, st.tx, org, o.debit)
			if err != nil {
				return fmt.Errorf("debiting org %s: %w", org, err)
			}
			if bal != o.balance {
				return fmt.Errorf("debiting org %s: balance %d, expected %d", org, bal, o.balance)
			}
		}
		if o.touched && o.balance == 0 {
			k, err := killLiveTx(ctx, st.tx, org, st.now)
			if err != nil {
				return err
			}
			st.killed = append(st.killed, k...)
		}
	}
	return nil
}
