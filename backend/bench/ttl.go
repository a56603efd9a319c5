package main

// TTL enforcement lag at scale (issue 11): how late the reconciler decides
// the stop of sandboxes whose endAt passes while 10k others are live, on
// SQLite and on PostgreSQL (a throwaway cluster, as the tests start).
//
// The records are inserted straight into the store and their instances into
// the in-memory provider (computetest): the engine is not what is measured
// (10k containers would not fit this host), the sweep and the transition
// gate on a real database are. The reconciler runs with the default
// DREADNODE_RECONCILE_INTERVAL (1 s).

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

var (
	ttlLive     = flag.Int("ttl-live", 10_000, "live records (long TTL) beside the expiring ones in the ttl part")
	ttlExpiring = flag.Int("ttl-expiring", 200, "records whose TTL passes during the ttl part")
	ttlDBs      = flag.String("ttl-db", "sqlite,postgres", "databases of the ttl part")
)

func ttlLag(ctx context.Context) {
	onDatabases(ctx, "ttl", *ttlDBs, func(name string, db *store.DB, org *store.Org) { ttlLagOn(ctx, name, db, org) })
}

// onDatabases runs measure on a fresh database of each of dbs (a
// comma-separated list of sqlite and postgres, from part's -<part>-db
// flag) with the bench's org, removing each when measure returns.
func onDatabases(ctx context.Context, part, dbs string, measure func(name string, db *store.DB, org *store.Org)) {
	open := func(name, url string) {
		db, err := store.Open(ctx, url)
		if err != nil {
			fail(err)
		}
		defer db.Close()
		org, _, err := db.EnsureOrg(ctx, "bench", 1e12)
		if err != nil {
			fail(err)
		}
		measure(name, db, org)
	}
	for _, name := range splitList(dbs) {
		switch name {
		case "sqlite":
			dir, err := os.MkdirTemp("", "dreadnode-bench-"+part)
			if err != nil {
				fail(err)
			}
			removeDir := atExit(func() { os.RemoveAll(dir) })
			open(name, filepath.Join(dir, "db"))
			removeDir()
		case "postgres":
			c, err := pgtest.StartCluster()
			if err != nil {
				fail(fmt.Errorf("the %s part on PostgreSQL needs a server: %w", part, err))
			}
			stop := atExit(func() { _ = c.Stop() })
			url, err := c.CreateDatabase(ctx)
			if err != nil {
				fail(err)
			}
			open(name, url)
			stop()
		default:
			fail(fmt.Errorf("-%s-db: unknown database %q (sqlite, postgres)", part, name))
		}
	}
}

func ttlLagOn(ctx context.Context, dbName string, db *store.DB, org *store.Org) {
	prov := computetest.New()
	insert := func(tx *sql.Tx, id string, now, endAt time.Time) error {
		ref := prov.Put(id, compute.StatusRunning)
		r := &store.Record{ID: id, OrgID: org.ID, Kind: sbx.KindRuntime, Provider: ref.Provider, ProviderID: ref.ID, Phase: sbx.PhaseRunning,
			TemplateID: "base", CPUCount: 1, MemoryMB: 512, CreatedAt: now, EndAt: endAt, TimeoutSec: int(endAt.Sub(now) / time.Second)}
		r.MarkRunning(now)
		return storetest.InsertFixtureTx(ctx, tx, r)
	}
	insertAll := func(ids []string, endAt func(i int) time.Time) {
		now := time.Now().UTC()
		for start := 0; start < len(ids); start += 2000 {
			if err := db.Tx(ctx, func(tx *sql.Tx) error {
				for i := start; i < min(start+2000, len(ids)); i++ {
					if err := insert(tx, ids[i], now, endAt(i)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				fail(err)
			}
		}
	}
	ids := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%05d", prefix, i)
		}
		return out
	}
	insertAll(ids("live", *ttlLive), func(int) time.Time { return time.Now().Add(time.Hour) })
	dueCost := time.Duration(1 << 62)
	for range 5 {
		t0 := time.Now()
		if _, err := db.DueRecords(ctx, time.Now()); err != nil {
			fail(err)
		}
		dueCost = min(dueCost, time.Since(t0))
	}

	rctx, cancel := context.WithCancel(ctx)
	rc := reconciler.New(reconciler.Config{DB: db, Provider: prov, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Interval: time.Second})
	done := make(chan struct{})
	go func() { defer close(done); _ = rc.Run(rctx) }()
	defer func() { cancel(); <-done }()
	// The loop is up (recovery over) once an already expired probe stops.
	insertAll([]string{"probe"}, func(int) time.Time { return time.Now().Add(-time.Second) })
	waitStopped(ctx, db, dbName, []string{"probe"}, time.Now().Add(2*time.Minute))

	// The expiring records' endAt spread over 3 s from 1 s on.
	expiring := ids("exp", *ttlExpiring)
	first, spread := time.Now().Add(time.Second), 3*time.Second
	insertAll(expiring, func(i int) time.Time { return first.Add(spread * time.Duration(i) / time.Duration(len(expiring))) })
	lags := waitStopped(ctx, db, dbName, expiring, first.Add(spread+time.Minute))
	fmt.Printf("%-28s p50 %6.1f ms   p99 %6.1f ms   max %6.1f ms   (%s, %d live, %d expiring; one due-records query %.2f ms; target p99 ≤ 100 ms)\n",
		"TTL endAt → stop decided", ms(pct(lags, 50)), ms(pct(lags, 99)), ms(pct(lags, 100)), dbName, *ttlLive, len(expiring), ms(dueCost))
}

// waitStopped polls until the TTL stop of every record of ids is decided and
// returns how late each was (endAt → the stop in its timeline).
func waitStopped(ctx context.Context, db *store.DB, dbName string, ids []string, deadline time.Time) []time.Duration {
	var lags []time.Duration
	for _, id := range ids {
		for {
			r, err := db.GetRecord(ctx, id)
			if err != nil {
				fail(err)
			}
			if at, ok := stoppedAt(r); ok {
				lags = append(lags, at.Sub(r.EndAt))
				break
			}
			if time.Now().After(deadline) {
				fail(fmt.Errorf("%s: %s not stopped by %s (phase %s)", dbName, id, deadline.Format(time.TimeOnly), r.Phase))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return lags
}

// stoppedAt is when the stop of r was decided for its TTL.
func stoppedAt(r *store.Record) (time.Time, bool) {
	for _, e := range r.Timeline {
		if e.Phase == string(sbx.PhaseStopping) && e.Cause == sbx.CauseTTL {
			return e.At, true
		}
	}
	return time.Time{}, false
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
