package store

import "sync"

// eventWake wakes the event streams of this replica: after every commit
// that changed a record (which is when an event may have been written), and
// on PostgreSQL after every change another replica commits (listen.go). Its
// zero value is ready.
type eventWake struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next signal.
func (w *eventWake) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// signal wakes every waiter; a no-op (no allocation) when nobody waits.
func (w *eventWake) signal() {
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	w.mu.Unlock()
}

// EventsChanged returns a channel closed when events may have been written
// since the call (by this replica or, on PostgreSQL, another one). A
// stream re-reads after it, and still polls on a bound: a wake-up missed
// while the listener reconnects must only delay, never lose, an event.
func (db *DB) EventsChanged() <-chan struct{} { return db.evWake.wait() }
