package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// getOnPostgres (part get-pg) loads GET /sandboxes/{id} on a replica on
// PostgreSQL (a throwaway cluster), where every cached read waits for a
// shared read barrier (store/listen.go), against the same load on the
// SQLite backend in this run: alone, then while another replica commits
// changes to another record as fast as it can (each one a notification this
// replica must apply in order before its barrier completes). Each load runs
// twice on the same replica: with the barrier, and without it (requests
// marked store.Relaxed: invalidation only, whose reads may miss another
// replica's write acknowledged less than a notification's delivery ago).
func getOnPostgres(ctx context.Context, sqlite *backend) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		fail(fmt.Errorf("part get-pg needs wrk (apt-get install wrk)"))
	}
	cluster, err := pgtest.StartCluster()
	if err != nil {
		fail(err)
	}
	defer atExit(func() { _ = cluster.Stop() })()
	url, err := cluster.CreateDatabase(ctx)
	if err != nil {
		fail(err)
	}
	pg := start(ctx, 0, func(c *app.Config) { c.DatabaseURL = url })
	defer pg.close()

	sqlite.createRunning()
	base := getRate(wrk, sqlite, sqlite.ids[0])
	pg.createRunning()
	pg.createRunning()
	relaxed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pg.app.Handler.ServeHTTP(w, r.WithContext(store.Relaxed(r.Context())))
	}))
	defer relaxed.Close()
	pgRelaxed := &backend{app: pg.app, srv: relaxed, key: pg.key}
	alone := getRate(wrk, pg, pg.ids[0])
	aloneRelaxed := getRate(wrk, pgRelaxed, pg.ids[0])

	// Another replica (a second store on the database) keeps changing the
	// second record.
	other, err := store.Open(ctx, url)
	if err != nil {
		fail(err)
	}
	defer other.Close()
	var writes atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; wctx.Err() == nil; i++ {
			if _, err := other.Transition(wctx, pg.ids[1], "", "", func(r *store.Record) error {
				r.Metadata = map[string]string{"n": strconv.Itoa(i)}
				return nil
			}); err == nil {
				writes.Add(1)
			}
		}
	}()
	t0 := time.Now()
	busy := getRate(wrk, pg, pg.ids[0])
	busyRelaxed := getRate(wrk, pgRelaxed, pg.ids[0])
	stop()
	wg.Wait()
	wps := float64(writes.Load()) / time.Since(t0).Seconds()

	report := func(name string, r wrkResult) {
		fmt.Printf("%-28s %8.0f req/s   p50 %s   p99 %s   ratio to SQLite %.2f× (target ≥ 20000 req/s, p99 ≤ 5 ms)\n",
			name, r.rate, r.p50, r.p99, r.rate/base.rate)
	}
	fmt.Printf("%-28s %8.0f req/s   p50 %s   p99 %s   (baseline, wrk 1 thread, %d connections)\n", "GET /sandboxes/{id} SQLite", base.rate, base.p50, base.p99, *getClients)
	report("GET on PostgreSQL", alone)
	report("  invalidation only", aloneRelaxed)
	report(fmt.Sprintf("  + %.0f writes/s elsewhere", wps), busy)
	report("  invalidation only", busyRelaxed)
	sqlite.cleanup()
	pg.cleanup()
}

type wrkResult struct {
	rate     float64
	p50, p99 string
}

func getRate(wrk string, b *backend, id string) wrkResult {
	rate, p50, p99 := b.wrk(wrk, b.srv.URL+"/sandboxes/"+id)
	r, _ := strconv.ParseFloat(string(rate[1]), 64)
	return wrkResult{rate: r, p50: string(p50[1]) + string(p50[2]), p99: string(p99[1]) + string(p99[2])}
}
