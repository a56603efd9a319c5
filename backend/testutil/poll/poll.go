// Package poll waits for a condition in tests: polling with a deadline,
// never a sleep as synchronisation. It imports nothing of the backend, so
// any package's tests may use it.
package poll

import (
	"testing"
	"time"
)

// Until polls cond every interval until it returns nil, and fails t with
// cond's last error once timeout has passed.
func Until(t testing.TB, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(interval) // poll interval, bounded by the deadline
	}
}
