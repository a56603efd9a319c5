package reconciler

import (
	"sync"
	"time"
)

// Clock is where the reconciler and its drivers read time, so a test can
// move time (a TTL expiring, a phase deadline passing) without waiting for
// it. The loop's own pacing (sweep ticker, lane polls) stays on real time:
// it decides how soon work is looked at, never what the work decides.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function (e.g. time.Now) to a Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// RealClock is the wall clock, the default.
var RealClock Clock = ClockFunc(time.Now)

// FakeClock is a Clock that moves only when told to, for tests of drivers.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock set at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
