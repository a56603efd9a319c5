package main

import (
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryShare is the share of the memory the backend may use that Go's
// soft limit is set to: the rest is for what the collector does not count
// (stacks of cgo-free threads aside, the binary's mapped text and the
// kernel's buffers for its sockets).
const memoryShare = 0.9

// setMemoryLimit sets Go's soft memory limit to memoryShare of the
// container's memory limit (cgroup v2's memory.max or v1's
// memory.limit_in_bytes), or of the host's memory when no cgroup limits it.
// The binary runs at GOGC=400 (fast GETs): without a limit the heap may
// grow to five times its live size before a collection, which a burst of
// garbage could push past what the container allows (the OOM killer, not a
// slow collection). With it the collector runs harder as the heap nears the
// limit instead. GOMEMLIMIT set (Go's own variable) wins; AUTOMEMLIMIT
// sets another share (0.5) or turns it off ("off").
func setMemoryLimit(log *slog.Logger) {
	limit, err := memlimit.SetGoMemLimitWithOpts(
		memlimit.WithRatio(memoryShare),
		memlimit.WithProvider(memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)),
	)
	switch {
	case err != nil:
		log.Warn("no memory limit for the Go runtime: the container's and host's memory could not be read; set GOMEMLIMIT (e.g. 900MiB)", "err", err)
	case limit > 0:
		log.Info("memory limit", "GOMEMLIMIT", limit, "share", memoryShare)
	}
}
