package store

import (
	"context"
	"database/sql"
	"time"
)

// SQLite in WAL mode copies the log back into the database file (a
// checkpoint) by default inside the commit that takes the log past 1,000
// pages: that commit waits for the copy and its fsync, 3 to 4 ms where a
// commit otherwise takes 0.2 ms. Every commit's p99 carried it, and more so
// the commits that write more pages (a transition and its event: make
// bench, part events, +3 ms p99 with the checkpoint in the commit, +0.2 ms
// without). So checkpoints run beside the writer instead: every
// checkpointEvery a reader connection runs a PASSIVE checkpoint, which
// neither waits for readers nor blocks the writer, and does nothing when
// the log holds nothing new. The writer's own automatic checkpoint stays as
// a backstop at walBackstop pages (~40 MB of log), reached only if this
// loop falls far behind.
const (
	checkpointEvery = 100 * time.Millisecond
	walBackstop     = 10_000
)

// checkpointLoop runs PASSIVE checkpoints on r until stop is closed.
func checkpointLoop(r *sql.DB, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// A failure (the file busy, or gone at shutdown) is retried at the
		// next tick; the backstop bounds the log meanwhile.
		_, _ = r.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		cancel()
	}
}
