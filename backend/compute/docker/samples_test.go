package docker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// peek never waits for a reading: nothing before the first one is in (it
// starts it), the latest one after; a failed reading is not answered and
// the next peek starts another. get waits for the first.
func TestSamplerPeek(t *testing.T) {
	t.Parallel()
	var c sampler[int]
	release, reads := make(chan struct{}), atomic.Int32{}
	read := func(context.Context) (int, error) {
		if reads.Add(1) == 1 {
			<-release
			return 0, errors.New("the engine did not answer")
		}
		return 42, nil
	}
	if v, ok := c.peek("a", time.Hour, read); ok || v != 0 {
		t.Fatalf("peek before any reading: %d %v", v, ok)
	}
	if _, ok := c.peek("a", time.Hour, read); ok {
		t.Fatal("peek answered while the first reading runs")
	}
	close(release) // the first reading fails
	poll.Until(t, time.Minute, 10*time.Millisecond, func() error {
		if v, ok := c.peek("a", time.Hour, read); !ok || v != 42 {
			return errors.New("no reading yet")
		}
		return nil
	})
	if v, err := c.get(context.Background(), "a", time.Hour, read); err != nil || v != 42 {
		t.Fatalf("get after a reading: %d %v", v, err)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d readings, want 2 (the failed one, then one more)", n)
	}
}
