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
