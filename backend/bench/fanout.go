package main

// Fan-out scenarios (issue #10): deadlines during a burst of creates, lists
// over a long history, and the cost of a sandbox's metrics.

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
)

var (
	burst       = flag.Int("burst", 100, "creates in the burst of the expiry scenario (the issue's figure is 500: a 2-core host takes minutes per 100)")
	expiring    = flag.Int("expiring", 20, "sandboxes created before the burst that expire during it")
	expiryTTL   = flag.Int("expiry-ttl", 5, "timeout (s) of the expiring sandboxes")
	history     = flag.Int("history", 100_000, "records stored for the list scenario")
	metricsRuns = flag.Int("metrics-n", 50, "sequential GET /sandboxes/{id}/metrics samples")
)

// expiryDuringBurst creates sandboxes with a short timeout, then a burst of
// creates, and measures how late each expiring sandbox is deleted (from its
// endAt to the deleted entry of its timeline), what it is billed, and GET by
// id latency meanwhile.
func expiryDuringBurst(ctx context.Context) {
	b := start(ctx, 0, func(c *app.Config) { c.MinTimeoutSec = 1; c.ReconcileInterval = 100 * time.Millisecond })
	defer b.close()
	var expIDs []string
	var mu sync.Mutex
	parallel(*expiring, func(int) {
		code, body := b.do("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": *expiryTTL})
		var sb struct{ SandboxID, State string }
		if err := json.Unmarshal(body, &sb); err != nil || code != 201 || sb.State != string(sbx.StateRunning) {
			fail(fmt.Errorf("expiring create: %d %s", code, body))
		}
		mu.Lock()
		expIDs = append(expIDs, sb.SandboxID)
		mu.Unlock()
	})

	// GET by id latency, sampled until the scenario ends.
	stopGets := make(chan struct{})
	var gets []time.Duration
	var getsDone sync.WaitGroup
	getsDone.Add(1)
	go func() {
		defer getsDone.Done()
		for {
			select {
			case <-stopGets:
				return
			default:
			}
			t0 := time.Now()
			if code, body := b.do("GET", "/sandboxes/"+expIDs[0], nil); code != 200 {
				fail(fmt.Errorf("GET during the burst: %d %s", code, body))
			}
			gets = append(gets, time.Since(t0))
			time.Sleep(5 * time.Millisecond) // a client polling, not a load generator
		}
	}()

	t0 := time.Now()
	burstIDs := make([]string, *burst)
	sem := make(chan struct{}, 32)
	parallel(*burst, func(i int) {
		sem <- struct{}{}
		defer func() { <-sem }()
		code, body := b.do("POST", "/sandboxes", map[string]any{"timeout": 600})
		var sb struct{ SandboxID string }
		if err := json.Unmarshal(body, &sb); err != nil || code != 201 {
			fail(fmt.Errorf("burst create: %d %s", code, body))
		}
		burstIDs[i] = sb.SandboxID
	})
	accepted := time.Since(t0)

	type outcome struct {
		decided, lag time.Duration // endAt → stopping, endAt → deleted
		billed       float64
	}
	var outs []outcome
	deadline := time.Now().Add(time.Duration(*expiryTTL)*time.Second + 5*time.Minute)
	for _, id := range expIDs {
		for {
			var sb struct {
				State    string
				EndAt    time.Time
				Timeline []struct {
					Phase string
					At    time.Time
				}
			}
			_, body := b.do("GET", "/sandboxes/"+id, nil)
			_ = json.Unmarshal(body, &sb)
			if sb.State == string(sbx.StateDeleted) && sb.Timeline[len(sb.Timeline)-1].Phase == string(sbx.PhaseDeleted) {
				_, lb := b.do("GET", "/api/v1/org/bench/sandboxes/"+id, nil)
				var led struct {
					TotalRuntimeSeconds float64 `json:"total_runtime_seconds"`
				}
				_ = json.Unmarshal(lb, &led)
				stopping := sb.Timeline[len(sb.Timeline)-2].At // the stop decided: billing ends, every view says deleted
				outs = append(outs, outcome{stopping.Sub(sb.EndAt), sb.Timeline[len(sb.Timeline)-1].At.Sub(sb.EndAt), led.TotalRuntimeSeconds})
				break
			}
			if time.Now().After(deadline) {
				fail(fmt.Errorf("sandbox %s not deleted 5 min after its endAt: %s", id, body))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The burst running (or failed): how long the engine took for it.
	deadline = time.Now().Add(max(5*time.Minute, time.Duration(*burst)*3*time.Second))
	for {
		code, body := b.do("GET", "/sandboxes?state=starting&limit=1", nil)
		if code == 200 && string(body) == "[]\n" {
			break
		}
		if time.Now().After(deadline) {
			fail(fmt.Errorf("the burst did not start by %s", deadline.Format(time.TimeOnly)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	started := time.Since(t0)
	close(stopGets)
	getsDone.Wait()

	var lags, decided []time.Duration
	maxBilled := 0.0
	for _, o := range outs {
		lags, decided = append(lags, o.lag), append(decided, o.decided)
		maxBilled = max(maxBilled, o.billed)
	}
	fmt.Printf("%-28s %d creates accepted in %.1f s, all started in %.1f s, while %d sandboxes (timeout %d s) expired\n",
		"burst with deadlines", *burst, accepted.Seconds(), started.Seconds(), *expiring, *expiryTTL)
	fmt.Printf("%-28s p50 %.2f s   p99 %.2f s\n", "  endAt → stop decided", pct(decided, 50).Seconds(), pct(decided, 99).Seconds())
	fmt.Printf("%-28s p50 %.2f s   p99 %.2f s   (target p99 ≤ 2 s)\n", "  endAt → deleted lag", pct(lags, 50).Seconds(), pct(lags, 99).Seconds())
	fmt.Printf("%-28s max %.3f s   (target ≤ timeout+1 = %d s)\n", "  billed running time", maxBilled, *expiryTTL+1)
	fmt.Printf("%-28s p50 %.2f ms   p99 %.2f ms over %d GETs   (target p99 ≤ 20 ms)\n", "  GET by id during burst", ms(pct(gets, 50)), ms(pct(gets, 99)), len(gets))
	b.mu.Lock()
	b.ids = append(b.ids, burstIDs...)
	b.mu.Unlock()
	b.cleanup()
}

// listsOverHistory stores a long history of ended records, then loads the
// lists with wrk: GET /sandboxes?state=deleted&limit=50, the default list
// (live sandboxes only) and the ledger list.
func listsOverHistory(ctx context.Context) {
	b := start(ctx, 0)
	defer b.close()
	t0 := time.Now()
	now := time.Now().UTC()
	const chunk = 5000
	for from := 0; from < *history; from += chunk {
		err := b.app.DB.Tx(ctx, func(tx *sql.Tx) error {
			for i := from; i < min(from+chunk, *history); i++ {
				at := now.Add(time.Duration(i-*history) * time.Second)
				r := &store.Record{ID: ids.New(), OrgID: "bench", Kind: sbx.KindRuntime, Provider: "docker", Phase: sbx.PhaseDeleted,
					TemplateID: "base", CPUCount: 1, MemoryMB: 512, TimeoutSec: 300, CreatedAt: at, StartedAt: at, KilledAt: at.Add(time.Minute),
					EndAt: at.Add(5 * time.Minute), KillReason: sbx.KillDeleted, RuntimeNs: int64(time.Minute), BilledNs: int64(time.Minute),
					Metadata: map[string]string{"n": strconv.Itoa(i)}, Timeline: []store.TimelineEntry{{Phase: string(sbx.PhasePending), At: at},
						{Phase: string(sbx.PhaseRunning), At: at}, {Phase: string(sbx.PhaseStopping), At: at.Add(time.Minute)}, {Phase: string(sbx.PhaseDeleted), At: at.Add(time.Minute)}}}
				if err := storetest.InsertFixtureTx(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fail(err)
		}
	}
	fmt.Printf("%-28s %d ended records stored in %.1f s\n", "lists over a history", *history, time.Since(t0).Seconds())
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		fmt.Printf("%-28s skipped: wrk is not installed (apt-get install -y wrk)\n", "")
		return
	}
	var last string
	if err := b.app.DB.Reader().QueryRowContext(ctx, `SELECT id FROM sandboxes ORDER BY seq DESC LIMIT 1`).Scan(&last); err != nil {
		fail(err)
	}
	for _, l := range []struct{ name, path string }{
		{"  baseline: GET by id", "/sandboxes/" + last},
		{"  ?state=deleted&limit=50", "/sandboxes?state=deleted&limit=50"},
		{"  default list (live)", "/sandboxes?limit=50"},
		{"  ledger list limit=50", "/api/v1/org/bench/sandboxes?limit=50"},
	} {
		rate, p50, p99 := b.wrk(wrk, b.srv.URL+l.path)
		fmt.Printf("%-28s %8s req/s   p50 %s%s   p99 %s%s   (wrk, %d connections; target ≥ 5000 req/s, p99 ≤ 20 ms)\n",
			l.name, rate[1], p50[1], p50[2], p99[1], p99[2], *getClients)
	}
}

// metricsLatency measures GET /sandboxes/{id}/metrics of one running
// sandbox: sequentially, then 8 clients at once.
func (b *backend) metricsLatency() {
	b.createRunning()
	path := "/sandboxes/" + b.ids[0] + "/metrics"
	call := func() time.Duration {
		t0 := time.Now()
		if code, body := b.do("GET", path, nil); code != 200 {
			fail(fmt.Errorf("metrics: %d %s", code, body))
		}
		return time.Since(t0)
	}
	first := call()
	var seq []time.Duration
	for range *metricsRuns {
		seq = append(seq, call())
	}
	var mu sync.Mutex
	var par []time.Duration
	for range 5 {
		parallel(8, func(int) {
			d := call()
			mu.Lock()
			par = append(par, d)
			mu.Unlock()
		})
	}
	fmt.Printf("%-28s first %.1f ms   p50 %.1f ms   8 in parallel: p50 %.1f ms, max %.1f ms   (target p50 ≤ 50 ms, 8 in parallel ≤ 100 ms each)\n",
		"GET /sandboxes/{id}/metrics", ms(first), ms(pct(seq, 50)), ms(pct(par, 50)), ms(pct(par, 100)))
	b.cleanup()
}
