// Package events serves lifecycle events (API §12): the org-wide and
// per-sandbox listings, the live stream, and the retention sweep. The
// events themselves are written by the store's transition gate.
package events

import (
	"context"
	"log/slog"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// DefaultRetention is how long events are kept when
// DREADNODE_EVENT_RETENTION is unset.
const DefaultRetention = 7 * 24 * time.Hour

// Config configures the service.
type Config struct {
	DB        *store.DB
	Logger    *slog.Logger
	Retention time.Duration // 0: DefaultRetention
	// Poll bounds how long a stream waits without a wake-up before it
	// reads again (0: 2 s).
	Poll time.Duration
	Now  func() time.Time
	// Delivery configures webhook deliveries.
	Delivery DeliveryConfig
}

// Service serves events.
type Service struct {
	cfg  Config
	db   *store.DB
	disp *dispatcher
}

// New builds the service.
func New(cfg Config) *Service {
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Delivery.defaults()
	return &Service{cfg: cfg, db: cfg.DB, disp: newDispatcher(cfg.DB, cfg.Delivery, cfg.Logger, cfg.Now)}
}

// Run delivers webhooks and sweeps expired events until ctx ends, then
// returns nil.
func (s *Service) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() { defer close(done); _ = s.disp.run(ctx) }()
	defer func() { <-done }()
	return s.sweep(ctx)
}

// sweep deletes expired events every hour, or every tenth of the retention
// when that is shorter.
func (s *Service) sweep(ctx context.Context) error {
	every := min(time.Hour, s.cfg.Retention/10)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.Sweep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep deletes the events older than the retention.
func (s *Service) Sweep(ctx context.Context) {
	n, err := s.db.DeleteEventsBefore(ctx, s.cfg.Now().Add(-s.cfg.Retention))
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("deleting expired events failed; retrying at the next sweep", "err", err)
	} else if n > 0 {
		s.cfg.Logger.Info("deleted expired events", "count", n, "retention", s.cfg.Retention)
	}
}
