// Package billing keeps the compute ledger (API §2) and org credits (§5):
// rates, settlement, balances and the ledger views.
//
// Every compute allocation is a store.Record: the lifecycle API (§1) and the
// ledger API (§2) are two projections of the same row, so there is one state
// machine and no duplicated state.
//
// Credits: running records accrue credits per second at a rate set by their
// resources (Rates). Settlement moves what accrued since the last settlement
// (Record.BilledNs) from the org balance to the record (BilledMicro) in one
// transaction, never below zero. When a balance reaches zero every live
// record of the org goes to stopping with kill_reason insufficient_credits.
// Accrual is derived from persisted timestamps (RuntimeNs, RunningSince), so
// time that ran while the backend was down is settled after a restart.
package billing

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Config wires a Service.
type Config struct {
	DB *store.DB
	// Logs reads the output of a sandbox (the lifecycle service's Logs),
	// for the ledger's logs route. Nil: the saved logs only.
	Logs func(ctx context.Context, rec *store.Record) ([]string, error)
	// Killed is told about each record sent to stopping for lack of
	// credits, so whoever drives records (the reconciler) acts on it at
	// once. Nil in store-only uses (tests, benchmarks).
	Killed func(rec *store.Record)
	// VolumeUsage is the org's volume count and their measured disk bytes
	// (the volumes service's Usage), for GET /sandboxes/usage. Nil: none.
	VolumeUsage func(ctx context.Context, org string) (count int, bytes int64, err error)
	Logger      *slog.Logger
	Now         func() time.Time
	// Rates is the credit rate table; the zero value means DefaultRates.
	Rates *Rates
	// SettleInterval is the period of the settle loop (default 10s).
	SettleInterval time.Duration
	// ChunkSize bounds the records settled in one transaction (default
	// store.ChargeBatch: one charge statement).
	ChunkSize int
	// RowByRow turns the settle pass's fast path (fastpath.go) off: every
	// record is settled by the row path, the reference the fast path is
	// tested against.
	RowByRow bool
}

// Service is the ledger and credits.
type Service struct {
	cfg   Config
	db    *store.DB
	log   *slog.Logger
	rates Rates

	pendingMu sync.Mutex
	pending   map[string]struct{} // records to settle soon (left running)
	wake      chan struct{}
}

// New returns the Service; its tables come with the store's schema.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("billing: Config.DB is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SettleInterval <= 0 {
		cfg.SettleInterval = DefaultSettleInterval
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = store.ChargeBatch
	}
	rates := DefaultRates
	if cfg.Rates != nil {
		rates = *cfg.Rates
	}
	return &Service{cfg: cfg, db: cfg.DB, log: cfg.Logger, rates: rates,
		pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}, nil
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// Rates is the rate table in use.
func (s *Service) Rates() Rates { return s.rates }

// ErrInsufficientCredits is what a create gets when the org's balance is
// zero.
func ErrInsufficientCredits(orgID string) error {
	return &domain.InsufficientCreditsError{Org: orgID}
}

// Admit refuses (ErrInsufficientCredits) new compute for an org whose balance is zero. Every
// create path calls it: sandbox create (lifecycle Config.Admit), runtime
// start and resume, task environment create.
func (s *Service) Admit(ctx context.Context, orgID string) error {
	c, err := s.db.OrgCredits(ctx, orgID)
	if errors.Is(err, store.ErrNotFound) {
		return ErrInsufficientCredits(orgID)
	}
	if err != nil {
		return err
	}
	if c <= 0 {
		return ErrInsufficientCredits(orgID)
	}
	return nil
}

// OnChange is the reconciler's Config.OnChange hook: a record that stopped
// accruing (paused or ended) is settled promptly by the loop.
func (s *Service) OnChange(r *store.Record) {
	if !r.RunningSince.IsZero() || r.RuntimeNs <= r.BilledNs {
		return
	}
	s.pendingMu.Lock()
	s.pending[r.ID] = struct{}{}
	s.pendingMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run settles every SettleInterval, and promptly after OnChange, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.SettleInterval)
	defer tick.Stop()
	s.pass(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			s.pass(ctx)
		case <-s.wake:
			s.pendingMu.Lock()
			ids := make([]string, 0, len(s.pending))
			for id := range s.pending {
				ids = append(ids, id)
			}
			clear(s.pending)
			s.pendingMu.Unlock()
			for _, id := range ids {
				if err := s.Settle(ctx, id); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrNotFound) {
					s.log.Warn("settling a stopped sandbox failed; the next pass retries", "record", id, "err", err)
				}
			}
		}
	}
}

func (s *Service) pass(ctx context.Context) {
	if _, err := s.SettleAll(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("settling credits failed; retrying next period", "err", err)
	}
}
