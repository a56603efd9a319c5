package reconciler

import "sync"

// notifier wakes goroutines waiting for a record to change (waitReady,
// ?wait polls). It is only a latency optimisation: waiters re-read the
// database, which stays the truth.
type notifier struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

// subscribe returns a channel closed at the next change of id.
func (n *notifier) subscribe(id string) <-chan struct{} {
	ch := make(chan struct{})
	n.mu.Lock()
	if n.waiters == nil {
		n.waiters = map[string][]chan struct{}{}
	}
	n.waiters[id] = append(n.waiters[id], ch)
	n.mu.Unlock()
	return ch
}

func (n *notifier) broadcast(id string) {
	n.mu.Lock()
	ws := n.waiters[id]
	delete(n.waiters, id)
	n.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}

// keyedMutex serialises work on one record inside this process, so the loop
// and a request handler never drive the same record at once. Across processes
// the conditional updates in the store keep transitions correct.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(id string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedEntry{}
	}
	e := k.locks[id]
	if e == nil {
		e = &keyedEntry{}
		k.locks[id] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.locks, id)
		}
		k.mu.Unlock()
	}
}
