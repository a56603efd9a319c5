package api

import (
	"log/slog"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// refusalLog logs refused API keys (the client's address and the key's
// first characters, never the key) at a bounded rate, so that guessing
// keys at speed cannot flood the log: past it, lines are counted and the
// next line logged says how many were left out.
type refusalLog struct {
	logger     *slog.Logger
	lim        *rate.Limiter
	suppressed *atomic.Int64
}

// Up to refusalBurst lines at once, then refusalsPerSecond.
const (
	refusalsPerSecond = 1
	refusalBurst      = 5
)

func newRefusalLog(log *slog.Logger) refusalLog {
	return refusalLog{logger: log, lim: rate.NewLimiter(refusalsPerSecond, refusalBurst), suppressed: new(atomic.Int64)}
}

func (l refusalLog) log(addr, key, why string) {
	if !l.lim.Allow() {
		l.suppressed.Add(1)
		return
	}
	l.logger.Warn("API key refused", "addr", addr, "key_prefix", store.KeyPrefix(key), "reason", why,
		"not_logged_since_last", l.suppressed.Swap(0))
}
