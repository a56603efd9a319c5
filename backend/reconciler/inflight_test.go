package reconciler

import (
	"context"
	"testing"
	"time"
)

// A create yielding to deadline work goes on when the last deadline drive
// ends, not at the bound, and at once when none is in flight.
func TestInFlightWakesWaitersWhenIdle(t *testing.T) {
	var f inFlight
	f.wait(context.Background(), time.Hour) // none in flight: returns at once

	end1, end2 := f.begin(), f.begin()
	woke := make(chan struct{})
	go func() { f.wait(context.Background(), time.Hour); close(woke) }()
	end1()
	select {
	case <-woke:
		t.Fatal("the waiter woke while a deadline drive was still in flight")
	default:
	}
	end2()
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken when the last deadline drive ended")
	}

	// A second round works the same (the idle channel is made again).
	end := f.begin()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.wait(ctx, time.Hour); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not return when its context ended")
	}
	end()
}
