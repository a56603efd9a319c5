package app

import (
	"context"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
)

// e2bProvider finds the E2B provider among the deployment's (nil if none).
func e2bProvider(p compute.Provider) *e2b.Provider {
	if e, ok := p.(*e2b.Provider); ok {
		return e
	}
	if m, ok := p.(interface{ Providers() []compute.Provider }); ok {
		for _, q := range m.Providers() {
			if e, ok := q.(*e2b.Provider); ok {
				return e
			}
		}
	}
	return nil
}

// wireE2BWebhook serves E2B's lifecycle callback (public: the signature
// authenticates it) and registers it with E2B in the background, when
// E2B_WEBHOOK_URL is set. The reconciler takes the events through the
// provider's Watch; its polling stays the fallback.
func (a *App) wireE2BWebhook() (public func(r *mux.Router)) {
	p := e2bProvider(a.Provider)
	if p == nil || p.WebhookPath() == "" {
		return func(*mux.Router) {}
	}
	a.loops = append(a.loops, func(ctx context.Context) error {
		// Retried until it succeeds or ctx ends, 1 s doubling to 1 min apart.
		_, err := backoff.Retry(ctx, func() (struct{}, error) { return struct{}{}, p.RegisterWebhook(ctx) },
			backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, MaxInterval: time.Minute}),
			backoff.WithMaxElapsedTime(0),
			backoff.WithNotify(func(err error, wait time.Duration) {
				a.Log.Warn("registering the E2B lifecycle webhook failed; retrying (until then, the reconciler's polling finds E2B's kills and pauses)",
					"err", err, "retry_in", wait)
			}))
		if err == nil {
			a.Log.Info("E2B lifecycle webhook registered; killed and paused sandboxes are applied as E2B reports them", "path", p.WebhookPath())
		}
		return nil // ended by ctx
	})
	return func(r *mux.Router) { r.Handle(p.WebhookPath(), p.CallbackHandler()).Methods(http.MethodPost) }
}
