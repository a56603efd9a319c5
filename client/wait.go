package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Doubling is the backoff the waits and retries of this module use: initial,
// 2×, 4×, … capped at max, without jitter.
func Doubling(initial, max time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: initial, Multiplier: 2, MaxInterval: max}
}

// StatePoll returns an object's current state. With hold > 0 it may ask the
// server to hold the answer up to hold while the state is still since (a
// long poll; since is "" when no state is known yet).
type StatePoll func(ctx context.Context, since string, hold time.Duration) (string, error)

// WaitOptions shape WaitState: how often it polls and whether it long-polls.
type WaitOptions struct {
	// Initial and Max bound the interval between polls: Initial doubling to Max.
	Initial, Max time.Duration
	// LongPoll asks the server to hold each answer. It is dropped when the
	// server refuses it (400) or answers a hold of 2 s or more at once with
	// the state unchanged (a server that ignores it): plain polls follow.
	LongPoll bool
	// MaxHold is the longest hold asked for; 0 asks for the current interval
	// and sleeps what is left of it when the state did not change.
	MaxHold time.Duration
	// PollFirst polls at once; otherwise the first poll comes after the
	// first interval (the caller has just read the state).
	PollFirst bool
	// Deadline ends the wait with a *WaitDeadlineError; zero: the context's
	// deadline, if any (its expiry then ends the wait with ctx.Err()).
	Deadline time.Time
	// OnState, if set, is called with the state given and with each new one.
	OnState func(state string)
}

// WaitDeadlineError is returned by WaitState when the deadline passes before
// a final state.
type WaitDeadlineError struct{ State string }

func (e *WaitDeadlineError) Error() string {
	return fmt.Sprintf("deadline exceeded while %s", e.State)
}

// WaitState polls until final(state) holds, from state ("" when unknown),
// and returns the last state seen. A poll's error ends the wait and is
// returned as is (the client has already retried what can be retried);
// so does the context's end (ctx.Err()). The provider's waits for sandboxes
// and task environments and dn's --wait all run on it.
func WaitState(ctx context.Context, state string, final func(string) bool, poll StatePoll, o WaitOptions) (string, error) {
	b := Doubling(o.Initial, o.Max)
	deadline := o.Deadline
	if deadline.IsZero() {
		deadline, _ = ctx.Deadline()
	}
	if state != "" && o.OnState != nil {
		o.OnState(state)
	}
	longPoll := o.LongPoll
	for first := true; state == "" || !final(state); first = false {
		left := time.Duration(1<<63 - 1)
		if !deadline.IsZero() {
			if left = time.Until(deadline); left <= 0 {
				return state, &WaitDeadlineError{State: state}
			}
		}
		interval := min(b.NextBackOff(), left)
		var next string
		var err error
		hold := interval
		if o.MaxHold > 0 {
			hold = min(o.MaxHold, left)
		}
		if hold = hold.Truncate(time.Second); longPoll && hold >= time.Second {
			asked := time.Now()
			next, err = poll(ctx, state, hold)
			switch {
			case StatusOf(err) == http.StatusBadRequest:
				longPoll = false // a server without ?wait/?since: poll with backoff
				b.Reset()
				continue
			case err == nil && next == state && hold >= 2*time.Second && time.Since(asked) < hold/4:
				longPoll = false // it answered without holding
			case err == nil && next == state && o.MaxHold == 0:
				if err := sleep(ctx, interval-time.Since(asked)); err != nil {
					return state, err
				}
			}
		} else {
			if !o.PollFirst || !first {
				if err := sleep(ctx, interval); err != nil {
					return state, err
				}
			}
			next, err = poll(ctx, "", 0)
		}
		if err != nil {
			if ctx.Err() != nil {
				return state, ctx.Err()
			}
			return state, err
		}
		if next != state {
			state = next
			if o.OnState != nil {
				o.OnState(state)
			}
		}
	}
	return state, nil
}

// sleep waits d or until ctx is done (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
