// Package ledger keeps the compute ledger (API §2), interactive runtimes (§4)
// and org credits (§5).
//
// Every compute allocation is a store.Record: the lifecycle API (§1) and the
// ledger API (§2) are two projections of the same row, so there is one state
// machine and no duplicated state. Runtimes are stable identities whose
// current sandbox is a record linked by id; their state is derived from that
// record.
//
// Credits: running records accrue credits per second at a rate set by their
// resources (Rates). Settlement moves what accrued since the last settlement
// (Record.BilledNs) from the org balance to the record (BilledMicro) in one
// transaction, never below zero. When a balance reaches zero every live
// record of the org goes to stopping with kill_reason insufficient_credits.
// Accrual is derived from persisted timestamps (RuntimeNs, RunningSince), so
// time that ran while the backend was down is settled after a restart.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/keyed"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/provider"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Config wires a Service.
type Config struct {
	DB *store.DB
	// Lifecycle provisions, pauses, resumes and deletes runtime sandboxes
	// and reads logs. Required for the runtime and logs routes.
	Lifecycle *lifecycle.Service
	// Reconciler is kicked for records killed for lack of credits and told
	// about changes (waiters). Nil in store-only uses (tests, benchmarks).
	Reconciler *reconciler.Reconciler
	// Provider lists the templates a runtime may use (optional).
	Provider provider.Provider
	Logger   *slog.Logger
	Now      func() time.Time
	// Rates is the credit rate table; the zero value means DefaultRates.
	Rates *Rates
	// SettleInterval is the period of the settle loop (default 10s).
	SettleInterval time.Duration
	// ChunkSize bounds the records settled in one transaction (default 256).
	ChunkSize int
}

// Service is the ledger, runtimes and credits.
type Service struct {
	cfg   Config
	db    *store.DB
	lc    *lifecycle.Service
	rc    *reconciler.Reconciler
	log   *slog.Logger
	rates Rates

	pendingMu sync.Mutex
	pending   map[string]struct{} // records to settle soon (left running)
	wake      chan struct{}

	rtLocks keyed.Mutex
}

// Migrations owned by the ledger: the runtimes table and a partial index
// that keeps the settle pass's scan proportional to unsettled records.
var migrations = []string{
	`CREATE TABLE ledger_runtimes (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		id TEXT NOT NULL UNIQUE,
		org_id TEXT NOT NULL REFERENCES orgs(id),
		workspace TEXT NOT NULL,
		name TEXT NOT NULL,
		template_id TEXT NOT NULL,
		cpu_count INTEGER NOT NULL DEFAULT 0,
		memory_mb INTEGER NOT NULL DEFAULT 0,
		timeout_sec INTEGER NOT NULL,
		env_vars TEXT NOT NULL DEFAULT '{}',
		metadata TEXT NOT NULL DEFAULT '{}',
		current_record_id TEXT NOT NULL DEFAULT '',
		last_record_id TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		UNIQUE (org_id, workspace, name)
	)`,
	`CREATE INDEX ledger_runtimes_ws ON ledger_runtimes (org_id, workspace, seq)`,
	`CREATE INDEX ledger_sandboxes_unsettled ON sandboxes (org_id, seq) WHERE ` + store.UnsettledWhere,
}

// migrations2 adds a partial index of live records per org: the kill of a
// broke org's records and the broke-org sweep read only live rows.
var migrations2 = []string{
	`CREATE INDEX ledger_sandboxes_live ON sandboxes (org_id, seq) WHERE phase IN ('pending', 'creating', 'running', 'pausing', 'paused', 'resuming')`,
}

// New applies the ledger's migrations and returns the Service.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("ledger: Config.DB is required")
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
		cfg.ChunkSize = 256
	}
	rates := DefaultRates
	if cfg.Rates != nil {
		rates = *cfg.Rates
	}
	if err := cfg.DB.Migrate(ctx, "ledger_0001", migrations...); err != nil {
		return nil, err
	}
	if err := cfg.DB.Migrate(ctx, "ledger_0002", migrations2...); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, db: cfg.DB, lc: cfg.Lifecycle, rc: cfg.Reconciler, log: cfg.Logger, rates: rates,
		pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}, nil
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// Rates is the rate table in use.
func (s *Service) Rates() Rates { return s.rates }

// ErrInsufficientCredits is the 402 a create gets when the org's balance is
// zero.
func ErrInsufficientCredits(orgID string) error {
	return httpx.NewError(http.StatusPaymentRequired, "insufficient_credits",
		fmt.Sprintf("organization %s has no credits left, so no new compute can start; ask an operator to grant credits (dreadnode-backend credits grant -org %s -amount N, or POST /admin/orgs/%s/credits)", orgID, orgID, orgID))
}

// Admit refuses (402) new compute for an org whose balance is zero. Every
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
