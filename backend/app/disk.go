package app

import (
	"context"
	"log/slog"
	"time"
)

// diskLimiter is a provider that says how sandboxes' disk use is limited
// on its host (the Docker provider: by the storage driver, or by its
// watchdog where the driver cannot).
type diskLimiter interface {
	DiskLimit(ctx context.Context) (detail string, warn bool)
}

// logDiskLimit says at start-up how sandboxes' disk use is limited, as a
// warning naming the storage driver and what to do when a write past the
// limit would not fail with ENOSPC.
func logDiskLimit(ctx context.Context, log *slog.Logger, p any) {
	d, ok := p.(diskLimiter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	detail, warn := d.DiskLimit(ctx)
	if warn {
		log.Warn("disk limit: " + detail)
		return
	}
	log.Info("disk limit: " + detail)
}

// readyDetails are what /readyz says beside its checks (without failing
// them): how disk use is limited, where the provider says.
func readyDetails(p any) map[string]func(context.Context) string {
	d, ok := p.(diskLimiter)
	if !ok {
		return nil
	}
	return map[string]func(context.Context) string{"disk": func(ctx context.Context) string {
		detail, _ := d.DiskLimit(ctx)
		return detail
	}}
}
