package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// sqlRate is Rates.For for the database (store.Rate).
func (r Rates) sqlRate() store.Rate {
	return store.Rate{SandboxSecond: r.SandboxSecond, CPUSecond: r.CPUSecond, GiBSecond: r.GiBSecond,
		DefaultCPU: DefaultCPU, DefaultMemoryMB: DefaultMemoryMB}
}

// errFastMoved rolls back a fast pass whose records moved under it on
// PostgreSQL so that an org now owes more than it has: the row path, which
// charges each record at most what is left, settles that pass instead.
var errFastMoved = errors.New("records moved during the settle pass")

// errFastOptimistic rolls back an optimistic fast pass (below) in which an
// org was charged more than its balance: the pass is redone exactly.
var errFastOptimistic = errors.New("an org owed more than its balance")

// settleFast is the settle pass's common case (store/settlefast.go): in one
// transaction, every org whose balance covers what its steadily running
// records owe is charged in one statement and debited by exactly the sum.
// It returns the moment it settled at and the orgs it left to the row path
// because their balance does not cover what they owe. The orgs skip returns
// are left alone (they take the row path); it is called once the pass knows
// which orgs it may charge.
//
// On PostgreSQL the pass first runs optimistically: it locks every org with
// a running record and charges all those with credits, without summing
// what they owe first (a scan of every running record, a fifth of the
// pass); an org charged past its balance rolls it back, and the pass is
// redone exactly (sums first, then only the orgs that can pay). The orgs
// are locked before any record either way, the order every settler takes.
func (s *Service) settleFast(ctx context.Context, rate store.Rate, skip func() (map[string]bool, error)) (now time.Time, dry []string, res SettleResult, err error) {
	if !rate.Positive() || s.cfg.RowByRow {
		return s.now(), nil, res, nil
	}
	if s.db.Dialect() == store.Postgres {
		now, dry, res, err = s.settleFastTx(ctx, rate, skip, true)
		if !errors.Is(err, errFastOptimistic) {
			return now, dry, res, err
		}
	}
	return s.settleFastTx(ctx, rate, skip, false)
}

func (s *Service) settleFastTx(ctx context.Context, rate store.Rate, skip func() (map[string]bool, error), optimistic bool) (now time.Time, dry []string, res SettleResult, err error) {
	var killed []*store.Record
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		killed, dry, res = nil, nil, SettleResult{}
		now = s.now() // read under the write lock, as settleRows does
		var due map[string]store.FastSum
		var orgs []string
		if optimistic {
			if orgs, err = store.RunningOrgsTx(ctx, tx); err != nil || len(orgs) == 0 {
				return err
			}
		} else {
			if due, err = store.FastDueTx(ctx, tx, now.UnixNano(), rate); err != nil || len(due) == 0 {
				return err
			}
			for o := range due {
				orgs = append(orgs, o)
			}
		}
		rowOrgs, err := skip()
		if err != nil {
			return err
		}
		orgs = slices.DeleteFunc(orgs, func(o string) bool { return rowOrgs[o] })
		slices.Sort(orgs)
		bal, err := store.OrgsCreditsForUpdateTx(ctx, tx, orgs) // locked in id order, as every settler does
		if err != nil {
			return err
		}
		var payers []string
		for _, o := range orgs {
			b, ok := bal[o]
			switch {
			case !ok: // no org to bill: its records are left as they are
			case optimistic && b > 0, !optimistic && due[o].Micro <= b:
				payers = append(payers, o)
			default: // the row path charges what is left and stops the rest
				dry = append(dry, o)
			}
		}
		charged, err := store.FastChargeTx(ctx, tx, now.UnixNano(), rate, payers, due)
		if err != nil {
			return fmt.Errorf("charging running records: %w", err)
		}
		for _, o := range payers {
			c := charged[o]
			if c.Records == 0 {
				continue
			}
			left := bal[o] - c.Micro
			if left < 0 && optimistic {
				return errFastOptimistic
			}
			if left < 0 {
				return errFastMoved
			}
			if c.Micro > 0 {
				got, err := store.DebitOrgTx(ctx, tx, o, c.Micro)
				if err != nil {
					return fmt.Errorf("debiting org %s: %w", o, err)
				}
				if got != left {
					return fmt.Errorf("debiting org %s: balance %d, expected %d", o, got, left)
				}
			}
			res.Records += c.Records
			res.Micro += c.Micro
			if left == 0 {
				k, err := killLiveTx(ctx, tx, o, now)
				if err != nil {
					return err
				}
				killed = append(killed, k...)
			}
		}
		return nil
	})
	if err != nil {
		return now, nil, SettleResult{}, err
	}
	res.Killed = len(killed)
	s.notifyKilled(killed)
	return now, dry, res, nil
}
