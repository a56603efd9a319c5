// Package notify is an in-process broadcast keyed by string: waiters get a
// channel that is closed at the next Notify of their key. It only wakes
// waiters up; they re-read the truth (the database, the engine) themselves.
package notify

import "sync"

// Hub is safe for concurrent use; the zero value is ready.
type Hub struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	ch   chan struct{}
	refs int
}

// Wait returns a channel closed at the next Notify(key), and a release
// function the caller must call when it stops waiting. Subscribe before
// reading the state you wait on, so a change in between is not missed.
func (h *Hub) Wait(key string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*entry{}
	}
	e := h.m[key]
	if e == nil {
		e = &entry{ch: make(chan struct{})}
		h.m[key] = e
	}
	e.refs++
	var once sync.Once
	return e.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			e.refs--
			if e.refs == 0 && h.m[key] == e {
				delete(h.m, key)
			}
		})
	}
}

// Notify wakes every current waiter of key.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e != nil {
		close(e.ch)
		delete(h.m, key)
	}
}

// Len is the number of keys with waiters (for tests).
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// NotifyAll wakes every current waiter of every key (e.g. when changes may
// have been missed: each waiter re-reads what it waits on).
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.m {
		close(e.ch)
		delete(h.m, key)
	}
}
