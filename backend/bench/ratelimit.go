package main

// Rate limits (issue #21): one key at ten times its read limit gets 429s
// with Retry-After, and another key's p99 latency does not move by more
// than 10 %. A ratio of the same backend with and without the noisy key,
// measured here rather than in a timed test (the project's rule).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/api"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
)

var (
	rlDuration = flag.Duration("ratelimit-duration", 5*time.Second, "length of each phase of the rate-limit part (3 rounds of quiet alone, then with the noisy key)")
	rlRead     = flag.Int("ratelimit-read", 100, "read limit per key and second of the rate-limit part's backend")
)

// rateLimitIsolation runs, in 3 interleaved rounds, a quiet key reading at
// half its limit alone and then beside a noisy key reading at ten times
// its limit, and compares the quiet key's p99.
func rateLimitIsolation(ctx context.Context) {
	limit := *rlRead
	b := start(ctx, 0, func(c *app.Config) {
		c.Limits = api.RateLimits{Class: map[string]api.Rate{api.ClassRead: {PerSecond: float64(limit), Burst: limit}}}
	})
	defer b.close()
	noisy := b.newKey("noisy")
	path := "/api/v1/org/bench/credits"
	var alone, beside []time.Duration
	var sent, limited, noRetry atomic.Int64
	for range 3 {
		alone = append(alone, b.paced(b.key, path, limit/2, *rlDuration, nil)...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		const workers = 4
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.paced(noisy, path, 10*limit/workers, 0, func(res *http.Response) bool {
					sent.Add(1)
					if res.StatusCode == http.StatusTooManyRequests {
						limited.Add(1)
						if res.Header.Get("Retry-After") == "" {
							noRetry.Add(1)
						}
					}
					select {
					case <-stop:
						return false
					default:
						return true
					}
				})
			}()
		}
		beside = append(beside, b.paced(b.key, path, limit/2, *rlDuration, nil)...)
		close(stop)
		wg.Wait()
	}
	if noRetry.Load() > 0 {
		fail(fmt.Errorf("rate limit: %d answers 429 without Retry-After", noRetry.Load()))
	}
	if limited.Load() == 0 {
		fail(fmt.Errorf("rate limit: the noisy key sent %d reads at 10× its limit and none got 429", sent.Load()))
	}
	p99a, p99b := pct(alone, 99), pct(beside, 99)
	fmt.Printf("%-28s noisy key at 10× its %d/s: %d of %d answered 429 (all with Retry-After); other key's p99 %.2f ms alone, %.2f ms beside it: ratio %.2f (target ≤ 1.10; %d samples each)\n",
		"rate limit isolation", limit, limited.Load(), sent.Load(), ms(p99a), ms(p99b), ms(p99b)/max(ms(p99a), 1e-9), len(alone))
}

// newKey makes a full key of the bench org and returns its secret.
func (b *backend) newKey(name string) string {
	code, body := b.do("POST", "/api/v1/org/bench/keys", map[string]any{"name": name})
	var k struct{ Key string }
	if code != http.StatusCreated || json.Unmarshal(body, &k) != nil || k.Key == "" {
		fail(fmt.Errorf("creating key %s: %d %s", name, code, body))
	}
	return k.Key
}

// paced GETs path with key at perSecond, for d (when d > 0) or while more
// (given each answer) says so, and returns the latency of each 200; any
// other answer than 200 or 429 fails the bench, and so does a 429 when
// more is nil (the quiet key must never be limited).
func (b *backend) paced(key, path string, perSecond int, d time.Duration, more func(*http.Response) bool) []time.Duration {
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var lat []time.Duration
	end := time.Now().Add(d)
	for range tick.C {
		if d > 0 && time.Now().After(end) {
			return lat
		}
		req, _ := http.NewRequestWithContext(context.Background(), "GET", b.srv.URL+path, nil)
		req.Header.Set("X-API-Key", key)
		t0 := time.Now()
		res, err := b.client.Do(req)
		if err != nil {
			fail(err)
		}
		_, _ = io.Copy(io.Discard, res.Body) // drained, so the connection is kept
		res.Body.Close()
		took := time.Since(t0)
		switch {
		case res.StatusCode == http.StatusOK:
			lat = append(lat, took)
		case res.StatusCode != http.StatusTooManyRequests || more == nil:
			fail(fmt.Errorf("GET %s: %d (the quiet key must get 200 every time)", path, res.StatusCode))
		}
		if more != nil && !more(res) {
			return lat
		}
	}
	return lat
}
