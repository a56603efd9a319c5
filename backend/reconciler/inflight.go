package reconciler

import (
	"context"
	"sync"
	"time"
)

// inFlight counts deadline drives in progress and wakes the creates that
// yield to them the moment the last one ends (rather than polling a
// counter). The bound on a yield is the loop's own pacing, so it is real
// time, not the Clock's (see Clock).
type inFlight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

// begin counts one drive in; the returned func counts it out.
func (f *inFlight) begin() (end func()) {
	f.mu.Lock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.n--
		if f.n == 0 {
			close(f.idle)
			f.idle = nil
		}
		f.mu.Unlock()
	}
}

// wait returns when no drive is in flight, after at most max, or when ctx
// ends.
func (f *inFlight) wait(ctx context.Context, max time.Duration) {
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	if idle == nil {
		return
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}
