package computetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// RemoveHold makes the group providers it wraps slow to remove: each
// removal reports its group id on Removing, then waits until Release (or
// its context ends) before the wrapped provider removes anything, so a
// test can look at what is true while the containers still exist.
type RemoveHold struct {
	removing chan string
	open     chan struct{}
	release  sync.Once
	mu       sync.Mutex
	err      error
}

// NewRemoveHold returns a hold that is shut until Release.
func NewRemoveHold() *RemoveHold {
	return &RemoveHold{removing: make(chan string, 16), open: make(chan struct{})}
}

// Wrap returns p with its removals held by h. Several providers may share
// one hold (a Service restarted on a new provider).
func (h *RemoveHold) Wrap(p compute.GroupProvider) compute.GroupProvider {
	return &heldRemoval{GroupProvider: p, h: h}
}

// Removing receives the group id of each removal that reached the hold.
func (h *RemoveHold) Removing() <-chan string { return h.removing }

// Release lets held and later removals go on (it may be called again).
func (h *RemoveHold) Release() { h.release.Do(func() { close(h.open) }) }

// FailWith makes removals past the hold fail with err instead of removing
// (nil: they remove again).
func (h *RemoveHold) FailWith(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

// WaitRemoving waits until the removal of group id reached the hold.
func (h *RemoveHold) WaitRemoving(t testing.TB, id string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-h.removing:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("the removal of %s never reached the group provider within %s", id, within)
		}
	}
}

// wait reports id and waits for the hold to open; its answer is the error
// set by FailWith, or ctx's.
func (h *RemoveHold) wait(ctx context.Context, id string) error {
	select {
	case h.removing <- id:
	default:
	}
	select {
	case <-h.open:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

type heldRemoval struct {
	compute.GroupProvider
	h *RemoveHold
}

func (r *heldRemoval) Remove(ctx context.Context, id string) error {
	_, err := r.RemoveCount(ctx, id)
	return err
}

func (r *heldRemoval) RemoveCount(ctx context.Context, id string) (int, error) {
	if err := r.h.wait(ctx, id); err != nil {
		return 0, err
	}
	return r.GroupProvider.RemoveCount(ctx, id)
}
