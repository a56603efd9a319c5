package templates

import (
	"context"
	"log/slog"
	"sync"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// maxLogEntries bounds the entries kept of one build's log (the engine
// bounds their bytes); past it one entry says so and the rest are dropped.
const maxLogEntries = 10_000

// logWriter appends a build's log entries to the store off the engine's
// goroutine (Log must not block), in order, in batches.
type logWriter struct {
	db      *store.DB
	buildID string
	log     *slog.Logger
	ch      chan store.BuildLogEntry
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	n       int
	closed  bool
}

func newLogWriter(db *store.DB, buildID string, log *slog.Logger) *logWriter {
	w := &logWriter{db: db, buildID: buildID, log: log, ch: make(chan store.BuildLogEntry, 1024), done: make(chan struct{})}
	go w.loop()
	return w
}

// add queues e; it never blocks (a full queue drops the entry).
func (w *logWriter) add(e store.BuildLogEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.n++
	switch {
	case w.n == maxLogEntries:
		e = store.BuildLogEntry{At: e.At, Level: e.Level, Message: "the build log reached its limit of 10000 entries; later entries are not kept"}
	case w.n > maxLogEntries:
		return
	}
	select {
	case w.ch <- e:
	default:
	}
}

func (w *logWriter) loop() {
	defer close(w.done)
	for e := range w.ch {
		batch := []store.BuildLogEntry{e}
		for len(batch) < 256 {
			select {
			case more, ok := <-w.ch:
				if !ok {
					w.write(batch)
					return
				}
				batch = append(batch, more)
				continue
			default:
			}
			break
		}
		w.write(batch)
	}
}

func (w *logWriter) write(batch []store.BuildLogEntry) {
	if err := w.db.AppendBuildLog(context.Background(), w.buildID, batch); err != nil {
		w.log.Warn("writing a template build's log", "build", w.buildID, "error", err)
	}
}

// close flushes what was queued and stops taking entries.
func (w *logWriter) close() {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		close(w.ch)
		w.mu.Unlock()
		<-w.done
	})
}
