package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// DefaultWaitDeadline bounds a wait without --timeout-sec (seed 000).
const DefaultWaitDeadline = 15 * time.Minute

// Backoff of polling when the server does not hold the answer (seed 000:
// 1 s doubling to a 5 s cap), and the longest long poll asked for.
const (
	backoffMin  = time.Second
	backoffMax  = 5 * time.Second
	maxLongPoll = 30 * time.Second
)

// errInterrupted is returned by waiter.run when the user interrupted the wait.
var errInterrupted = errors.New("interrupted")

// errDeadline is returned by waiter.run when the deadline passed first.
type errDeadline struct{ state string }

func (e *errDeadline) Error() string { return "deadline exceeded while " + e.state }

// pollFunc returns the object's current state. With wait > 0 it may use the
// server's long poll: hold up to wait while the state is still since.
type pollFunc func(ctx context.Context, since string, wait time.Duration) (string, error)

// waiter follows an object's state until a final one, printing each state
// as it is reached with the time since start.
type waiter struct {
	start, deadline time.Time
	// longPoll is tried first; it is dropped when the server refuses it or
	// answers without holding.
	longPoll bool
	out      io.Writer
	p        *progress
	what     string
}

func (w *waiter) line(state string) {
	w.p.println(w.out, fmt.Sprintf("state=%s elapsed=%s", state, elapsed(time.Since(w.start))))
}

func (w *waiter) run(ctx context.Context, state string, final func(string) bool, poll pollFunc) (string, error) {
	w.line(state)
	backoff := backoffMin
	for !final(state) {
		w.p.set(fmt.Sprintf("waiting for %s (%s)", w.what, state))
		left := time.Until(w.deadline)
		if left <= 0 {
			return state, &errDeadline{state: state}
		}
		var next string
		var err error
		if w.longPoll && left >= time.Second {
			hold := min(left, maxLongPoll).Truncate(time.Second)
			asked := time.Now()
			next, err = poll(ctx, state, hold)
			switch {
			case client.StatusOf(err) == http.StatusBadRequest:
				w.longPoll, err = false, nil // a server without ?wait/?since: poll with backoff
				continue
			case err == nil && next == state && hold >= 2*time.Second && time.Since(asked) < hold/4 && time.Until(w.deadline) > 0:
				w.longPoll = false // it answered without holding
			}
		} else {
			t := time.NewTimer(min(backoff, left))
			select {
			case <-ctx.Done():
				t.Stop()
				return state, errInterrupted
			case <-t.C:
			}
			backoff = min(backoff*2, backoffMax)
			next, err = poll(ctx, "", 0)
		}
		if err != nil {
			if ctx.Err() != nil {
				return state, errInterrupted
			}
			return state, err
		}
		if next != state {
			state = next
			w.line(state)
		}
	}
	return state, nil
}
