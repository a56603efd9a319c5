package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// SettleResult summarises settlement work.
type SettleResult struct {
	Records int   // records whose billed time moved
	Micro   int64 // micro-credits moved from balances to records
	Killed  int   // records sent to stopping for lack of credits
}

func (r *SettleResult) add(o SettleResult) {
	r.Records += o.Records
	r.Micro += o.Micro
	r.Killed += o.Killed
}

// Settle bills what record id accrued since its last settlement, in one
// transaction with the org's debit (and, when the balance reaches zero, the
// kill of the org's live records).
func (s *Service) Settle(ctx context.Context, id string) error {
	_, err := s.settleRows(ctx, []store.BillingRow{{ID: id, Version: -1}})
	return err
}

// SettleAll is one settle pass: every record with unbilled running time is
// settled (in transactions of at most ChunkSize records), then orgs whose
// balance is zero while they still have live records see those killed.
func (s *Service) SettleAll(ctx context.Context) (SettleResult, error) {
	var res SettleResult
	rows, err := s.db.UnsettledRecords(ctx, "")
	if err != nil {
		return res, err
	}
	now := s.now()
	due := rows[:0]
	for i := range rows {
		b := &rows[i]
		delta := int64(b.RuntimeAt(now)) - b.BilledNs
		if delta <= 0 {
			continue
		}
		// A running record with less than a micro-credit due waits for the
		// next pass (its remainder carries over); a stopped one is closed out.
		if rate := s.rates.For(b.CPUCount, b.MemoryMB); !b.RunningSince.IsZero() && rate > 0 && cost(delta, rate) == 0 {
			continue
		}
		due = append(due, *b)
	}
	var errs []error
	for start := 0; start < len(due); start += s.cfg.ChunkSize {
		r, err := s.settleRows(ctx, due[start:min(start+s.cfg.ChunkSize, len(due))])
		res.add(r)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	broke, err := s.db.BrokeOrgs(ctx)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	for _, org := range broke {
		r, err := s.killBroke(ctx, org)
		res.add(r)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// settleRows settles records in ONE transaction. The rows may have been read
// before it: each charge is conditional on the row's version, and a row that
// changed meanwhile (or has Version -1) is re-read inside the transaction
// first. Balances are read inside it; each record is charged at most what
// its org has left, the orgs are debited by exactly the sum charged and, for
// every org left at zero, its live records are sent to stopping.
func (s *Service) settleRows(ctx context.Context, rows []store.BillingRow) (SettleResult, error) {
	var res SettleResult
	var killed []*store.Record
	var charges []store.Charge
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, killed, charges = SettleResult{}, nil, charges[:0]
		now := s.now() // read under the write lock: no committed transition is newer
		stmt, err := store.ChargeStmt(ctx, tx)
		if err != nil {
			return err
		}
		defer stmt.Close()
		type orgState struct {
			balance, debit int64
			touched        bool
		}
		orgs := map[string]*orgState{}
		var order []string
		for i := range rows {
			b := rows[i]
			for attempt := 0; ; attempt++ {
				if b.Version < 0 || attempt > 0 {
					fresh, err := store.BillingRowsTx(ctx, tx, []string{b.ID})
					if err != nil {
						return err
					}
					if len(fresh) == 0 {
						break // the record is gone
					}
					b = fresh[0]
				}
				o := orgs[b.OrgID]
				if o == nil {
					// The org's row stays locked (on PostgreSQL) until the
					// transaction ends: the balance read here is the one
					// debited, whatever other replicas settle meanwhile.
					bal, err := store.OrgCreditsForUpdateTx(ctx, tx, b.OrgID)
					if errors.Is(err, store.ErrNotFound) {
						break // no org to bill: leave the record as it is
					}
					if err != nil {
						return err
					}
					o = &orgState{balance: max(bal, 0)}
					orgs[b.OrgID] = o
					order = append(order, b.OrgID)
				}
				runtime := int64(b.RuntimeAt(now))
				delta := runtime - b.BilledNs
				if delta <= 0 {
					break
				}
				rate := s.rates.For(b.CPUCount, b.MemoryMB)
				due := cost(delta, rate)
				charge := min(due, o.balance)
				var billed int64
				switch {
				case charge < due, rate == 0, b.RunningSince.IsZero():
					// Out of credits: bill what is left and close the period
					// (the rest is not owed twice). Stopped: close out,
					// dropping a remainder below one micro-credit.
					billed = runtime
				default:
					billed = min(b.BilledNs+paidNs(due, rate), runtime)
				}
				if charge == 0 && billed == b.BilledNs {
					break
				}
				c, err := store.ApplyCharge(ctx, stmt, &b, charge, billed)
				if errors.Is(err, store.ErrConflict) && attempt == 0 {
					continue // changed since it was read: re-read and recompute
				}
				if err != nil {
					return err
				}
				charges = append(charges, c)
				o.balance -= charge
				o.debit += charge
				o.touched = true
				res.Records++
				res.Micro += charge
				break
			}
		}
		for _, org := range order {
			o := orgs[org]
			if o.debit > 0 {
				bal, err := store.DebitOrgTx(ctx, tx, org, o.debit)
				if err != nil {
					return fmt.Errorf("debiting org %s: %w", org, err)
				}
				if bal != o.balance {
					return fmt.Errorf("debiting org %s: balance %d, expected %d", org, bal, o.balance)
				}
			}
			if o.touched && o.balance == 0 {
				k, err := killLiveTx(ctx, tx, org, now)
				if err != nil {
					return err
				}
				killed = append(killed, k...)
			}
		}
		return nil
	})
	if err != nil {
		return SettleResult{}, err
	}
	s.db.PublishCharges(ctx, charges)
	res.Killed = len(killed)
	s.notifyKilled(killed)
	return res, nil
}

// killBroke kills the live records of an org whose balance is (still) zero.
func (s *Service) killBroke(ctx context.Context, org string) (SettleResult, error) {
	var killed []*store.Record
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		killed = nil
		bal, err := store.OrgCreditsForUpdateTx(ctx, tx, org) // a grant waits, or wins first
		if err != nil || bal > 0 {
			return err // credits were granted meanwhile
		}
		killed, err = killLiveTx(ctx, tx, org, s.now())
		return err
	})
	if err != nil {
		return SettleResult{}, err
	}
	s.notifyKilled(killed)
	return SettleResult{Killed: len(killed)}, nil
}

// killLiveTx sends every live record of org to stopping with kill_reason
// insufficient_credits. The reconciler (or, for task records, the task
// service) removes the instances and ends the records.
func killLiveTx(ctx context.Context, tx *sql.Tx, org string, now time.Time) ([]*store.Record, error) {
	ids, err := store.LiveRecordIDsTx(ctx, tx, org)
	if err != nil {
		return nil, err
	}
	var out []*store.Record
	for _, id := range ids {
		r, err := store.TransitionTx(ctx, tx, id, sandbox.PhaseStopping, sandbox.CauseCredits, func(r *store.Record) error {
			r.StopAt(now) // the balance reached zero now: nothing after is billed
			if r.KillReason == "" {
				r.KillReason = sandbox.KillInsufficientCredits
			}
			return nil
		})
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *Service) notifyKilled(killed []*store.Record) {
	for _, r := range killed {
		s.log.Info("stopping a sandbox: its organization has no credits left", "record", r.ID, "org", r.OrgID, "kind", r.Kind)
		if s.cfg.Killed != nil {
			s.cfg.Killed(r)
		}
	}
}

// RunningCredits is what r accrued since its last settlement, in micro-credits.
func (s *Service) RunningCredits(r *store.Record) int64 {
	return cost(int64(r.RuntimeAt(s.now()))-r.BilledNs, s.rates.For(r.CPUCount, r.MemoryMB))
}
