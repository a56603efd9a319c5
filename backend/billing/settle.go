package billing

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
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
// settled, then orgs whose balance is zero while they still have live
// records see those killed. The records of orgs whose records all run
// steadily and who can pay for them are charged by the database in one
// statement (settleFast). The other orgs' records (an org with a stopped
// record to close out, a record past its end, or a balance that does not
// cover what it owes) are settled row by row, in transactions of at most
// ChunkSize records, in seq order: which of an org's records a short
// balance pays for stays what the row path decides.
func (s *Service) SettleAll(ctx context.Context) (SettleResult, error) {
	var res SettleResult
	var errs []error
	rate := s.rates.sqlRate()
	if s.cfg.RowByRow {
		rate = store.Rate{}
	}
	// Which orgs take the row path is a scan of the running records of its
	// own; it runs beside the fast pass's (on a read connection: it sees
	// the records as they were before the pass, as when it ran first), and
	// the fast pass waits for it only when it must leave those orgs out.
	scan := make(chan struct{})
	var rowOrgs map[string]bool
	var scanErr error
	go func() {
		defer close(scan)
		rowOrgs, scanErr = s.rowPathOrgs(ctx, rate)
	}()
	skip := func() (map[string]bool, error) { <-scan; return rowOrgs, scanErr }
	_, dry, r, err := s.settleFast(ctx, rate, skip)
	if _, err := skip(); err != nil {
		return res, err
	}
	res.add(r)
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if !errors.Is(err, errFastMoved) {
			errs = append(errs, err)
		}
		rate = store.Rate{} // the row path settles every record this pass
	}
	var rows []store.BillingRow
	if rate.Positive() {
		for _, o := range dry {
			rowOrgs[o] = true
		}
		rows, err = s.db.UnsettledRecordsOf(ctx, slices.Sorted(maps.Keys(rowOrgs)))
	} else {
		rows, err = s.db.UnsettledRecords(ctx, "")
	}
	if err != nil {
		return res, errors.Join(append(errs, err)...)
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

// rowPathOrgs lists the orgs with a record the fast path does not charge
// (store.SlowUnsettledRecords) that owes something: their records all take
// the row path. With no fast path (rate not Positive) it is empty.
func (s *Service) rowPathOrgs(ctx context.Context, rate store.Rate) (map[string]bool, error) {
	orgs := map[string]bool{}
	if !rate.Positive() {
		return orgs, nil
	}
	now := s.now()
	slow, err := s.db.SlowUnsettledRecords(ctx, now.UnixNano(), rate)
	for i := range slow {
		if int64(slow[i].RuntimeAt(now)) > slow[i].BilledNs {
			orgs[slow[i].OrgID] = true
		}
	}
	return orgs, err
}

// settleRows settles records in ONE transaction (see settlement). The rows
// may have been read before it: each charge is conditional on the row's
// version, and a row that changed meanwhile (or has Version -1) is re-read
// inside the transaction. Balances are read inside it, their rows locked;
// each record is charged at most what its org has left, the orgs are
// debited by exactly the sum charged and, for every org left at zero, its
// live records are sent to stopping.
func (s *Service) settleRows(ctx context.Context, rows []store.BillingRow) (SettleResult, error) {
	var st *settlement
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		// now is read under the write lock: no committed transition is newer.
		st = &settlement{s: s, tx: tx, now: s.now(), orgs: map[string]*orgState{}}
		return st.run(ctx, rows)
	})
	if err != nil {
		return SettleResult{}, err
	}
	s.db.PublishCharges(ctx, st.charges)
	st.res.Killed = len(st.killed)
	s.notifyKilled(st.killed)
	return st.res, nil
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
