package lifecycle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// A failed read of the provider's templates is not kept: the next create
// reads them again (a sync.Once kept the failure, or was reset while other
// creates were inside Do).
func TestTemplateCacheRetriesAFailedRead(t *testing.T) {
	var c templateCache
	var calls atomic.Int32
	fail := true
	load := func(context.Context) ([]compute.Template, error) {
		calls.Add(1)
		if fail {
			return nil, errors.New("engine unreachable")
		}
		return []compute.Template{{ID: "base"}}, nil
	}
	if _, err := c.get(context.Background(), load); err == nil {
		t.Fatal("a failed read answered no error")
	}
	fail = false
	got, err := c.get(context.Background(), load)
	if err != nil || got["base"].ID != "base" {
		t.Fatalf("the read after a failure: %v, %v; want the base template", got, err)
	}

	// Concurrent creates after a success read nothing more (run with -race).
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m, err := c.get(context.Background(), load); err != nil || len(m) != 1 {
				t.Errorf("concurrent get: %v, %v", m, err)
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Fatalf("the provider was asked %d times; want 2 (the failure, then one success)", n)
	}
}
