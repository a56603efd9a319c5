package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitStateDeadline(t *testing.T) {
	polls := 0
	start := time.Now()
	state, err := WaitState(context.Background(), "building", func(s string) bool { return s == "ready" },
		func(context.Context, string, time.Duration) (string, error) { polls++; return "building", nil },
		WaitOptions{Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond, Deadline: start.Add(300 * time.Millisecond)})
	var de *WaitDeadlineError
	if !errors.As(err, &de) || de.State != "building" || state != "building" {
		t.Fatalf("state %q, err %v; want a deadline error while building", state, err)
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", elapsed)
	}
	// 20 + 40 + 40 + … ms within 300 ms: at most 8 polls, and more than 2.
	if polls < 3 || polls > 8 {
		t.Fatalf("%d polls in 300 ms at 20 ms doubling to 40 ms", polls)
	}
}

// A server that answers a long poll of 2 s or more at once, unchanged,
// ignores the hold: the wait goes on with plain polls.
func TestWaitStateDropsAnIgnoredLongPoll(t *testing.T) {
	var holds []time.Duration
	state, err := WaitState(context.Background(), "building", func(s string) bool { return s == "ready" },
		func(_ context.Context, _ string, hold time.Duration) (string, error) {
			holds = append(holds, hold)
			if len(holds) < 2 {
				return "building", nil
			}
			return "ready", nil
		}, WaitOptions{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, LongPoll: true, MaxHold: 30 * time.Second})
	if err != nil || state != "ready" {
		t.Fatalf("state %q, err %v", state, err)
	}
	if len(holds) != 2 || holds[0] != 30*time.Second || holds[1] != 0 {
		t.Fatalf("holds %v: want one long poll of 30s, then a plain poll", holds)
	}
}

// With MaxHold 0 the hold is the current interval, and an unchanged answer
// that came early is followed by the rest of the interval.
func TestWaitStatePacesTheInterval(t *testing.T) {
	var at []time.Time
	state, err := WaitState(context.Background(), "", func(s string) bool { return s == "ready" },
		func(_ context.Context, _ string, hold time.Duration) (string, error) {
			at = append(at, time.Now())
			if hold != time.Second {
				t.Errorf("hold %v, want the 1 s interval", hold)
			}
			if len(at) < 3 {
				return "building", nil
			}
			return "ready", nil
		}, WaitOptions{Initial: time.Second, Max: time.Second, LongPoll: true, PollFirst: true})
	if err != nil || state != "ready" || len(at) != 3 {
		t.Fatalf("state %q, err %v, %d polls", state, err, len(at))
	}
	// The first answer changed the state (""→building): asked again at once;
	// the second did not: the third poll waits out the interval.
	if gap := at[2].Sub(at[1]); gap < 900*time.Millisecond {
		t.Fatalf("an unchanged early answer was followed %v later, want the rest of the 1 s interval", gap)
	}
}

func TestWaitStateCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := WaitState(ctx, "building", func(s string) bool { return s == "ready" },
		func(context.Context, string, time.Duration) (string, error) { cancel(); return "building", nil },
		WaitOptions{Initial: time.Minute, Max: time.Minute, PollFirst: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
