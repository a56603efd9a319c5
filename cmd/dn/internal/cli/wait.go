package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// DefaultWaitDeadline bounds a wait without --timeout-sec (README, dn).
const DefaultWaitDeadline = 15 * time.Minute

// Backoff of polling when the server does not hold the answer (1 s doubling
// to a 5 s cap, as the README says), and the longest long poll asked for.
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

// run waits from state until final(state), on client.WaitState: long polls
// first when w.longPoll (holding up to maxLongPoll), else polls with backoff.
func (w *waiter) run(ctx context.Context, state string, final func(string) bool, poll pollFunc) (string, error) {
	state, err := client.WaitState(ctx, state, final, client.StatePoll(poll), client.WaitOptions{
		Initial: backoffMin, Max: backoffMax, LongPoll: w.longPoll, MaxHold: maxLongPoll, Deadline: w.deadline,
		OnState: func(s string) {
			w.line(s)
			if !final(s) {
				w.p.set(fmt.Sprintf("waiting for %s (%s)", w.what, s))
			}
		},
	})
	var de *client.WaitDeadlineError
	switch {
	case errors.As(err, &de):
		return state, &errDeadline{state: state}
	case err != nil && ctx.Err() != nil:
		return state, errInterrupted
	}
	return state, err
}
