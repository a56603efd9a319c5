package tasks

import (
	"context"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/compose"
)

// Engine is the runtime task environments run on: what the worker, the
// handlers and the sweep need. *compose.Engine (Docker, the default) and
// e2bengine.Engine (E2B) implement it. Every resource an Engine creates is
// labelled with its environment id so that Snapshot, Remove and the sweep
// find it again after a restart. Errors worded for the environment's error
// field are *compose.BuildError, *compose.ServiceError and
// *compose.ProviderError; Exec reports a service that is not running with
// compose.ErrNotRunning.
type Engine interface {
	// Images computes the image of every service of p (none for runtimes
	// that start prebuilt templates); Missing reports those to build and
	// Build builds them, returning how many it built.
	Images(p *types.Project, taskName string) (map[string]*compose.Image, error)
	Missing(ctx context.Context, imgs map[string]*compose.Image) ([]*compose.Image, error)
	Build(ctx context.Context, imgs map[string]*compose.Image) (int, error)
	// Builds is the number of image builds run so far.
	Builds() int64
	// Bring starts (or adopts) every service of an environment and waits
	// until they are ready.
	Bring(ctx context.Context, u *compose.Up) (*compose.UpResult, error)
	// Remove deletes everything of environment envID (idempotent);
	// RemoveCount also says how many resources it found.
	Remove(ctx context.Context, envID string) error
	RemoveCount(ctx context.Context, envID string) (int, error)
	Pause(ctx context.Context, envID string) error
	Unpause(ctx context.Context, envID string) error
	// Exec runs argv in service's instance with a budget of timeout
	// (exceeding it: TimedOut, exit code 124), keeping up to maxOutput bytes
	// of combined output.
	Exec(ctx context.Context, envID, service string, argv []string, timeout time.Duration, maxOutput int) (*compose.ExecResult, error)
	// Snapshot lists every instance of this owner by environment id.
	Snapshot(ctx context.Context) (*compose.Snapshot, error)
	// LastLogs returns the last n log lines of instance id.
	LastLogs(ctx context.Context, id string, n int) []string
	// Ping reports whether the runtime answers (for /readyz).
	Ping(ctx context.Context) error
	// Negotiate prepares the client before concurrent use; Watch follows
	// the runtime's events until ctx is done (it may return at once when the
	// runtime has none).
	Negotiate(ctx context.Context)
	Watch(ctx context.Context)
	Close() error
}

// KeepAliver is implemented by engines whose instances have a provider-side
// time to live (E2B): the service asks them to keep an environment's
// instances alive at least d from now when it becomes ready and when it is
// resumed. The service's own sweep still ends the environment at its
// expires_at; the provider's TTL is only the backstop for a backend that is
// down.
type KeepAliver interface {
	KeepAlive(ctx context.Context, envID string, d time.Duration) error
}

// Named is implemented by engines that are not Docker: the name goes into
// the ledger record's provider field (default "docker").
type Named interface {
	Name() string
}

var _ Engine = (*compose.Engine)(nil)

// RuntimeChecker is implemented by engines that run services on a named
// runtime (Docker): CheckRuntime returns a *hardening.RuntimeError when the
// engine does not offer runtime. Engines without it (E2B, whose instances
// are microVMs already) ignore task.yaml's runtime.
type RuntimeChecker interface {
	CheckRuntime(ctx context.Context, field, runtime string) error
}

var _ RuntimeChecker = (*compose.Engine)(nil)
