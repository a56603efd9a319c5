package main

// Lifecycle events (issue 24), on SQLite and on PostgreSQL (a throwaway
// cluster, as the tests start):
//
//   - what the outbox adds to a transition: the same field-only update
//     through the transition gate, once leaving the record's metadata as it
//     was (no event) and once changing it (a sandbox.lifecycle.updated row
//     in the same transaction), alternated so both see the same load;
//   - delivery lag: transitions driven at a steady rate through the gate
//     while the events service (the dispatcher every replica runs) delivers
//     them to a webhook receiver on loopback; the lag is each event's
//     timestamp → its receipt.
//
// The records are inserted straight into the store: the engine is not what
// is measured, the gate, the outbox and the dispatcher on a real database are.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/events"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
)

var (
	evTransitions = flag.Int("events-transitions", 4000, "transitions per side (with and without an event) in the events part")
	evRate        = flag.Int("events-rate", 1000, "transitions per second driven to the webhook receiver in the events part")
	evDuration    = flag.Duration("events-duration", 10*time.Second, "how long the events part drives transitions to the receiver")
	evSandboxes   = flag.Int("events-sandboxes", 1000, "records the events part's transitions are spread over")
	evDBs         = flag.String("events-db", "sqlite,postgres", "databases of the events part")
)

func eventsPart(ctx context.Context) {
	onDatabases(ctx, "events", *evDBs, func(name string, db *store.DB, org *store.Org) { eventsOn(ctx, name, db, org) })
}

func eventsOn(ctx context.Context, dbName string, db *store.DB, org *store.Org) {
	ids := make([]string, max(1, *evSandboxes))
	now := time.Now().UTC()
	for i := range ids {
		ids[i] = fmt.Sprintf("ev-%05d", i)
		r := &store.Record{ID: ids[i], OrgID: org.ID, Kind: sbx.KindRuntime, Provider: "bench", ProviderID: ids[i], Phase: sbx.PhaseRunning,
			TemplateID: "base", CPUCount: 1, MemoryMB: 512, CreatedAt: now, Metadata: map[string]string{"n": "0"}}
		r.MarkRunning(now)
		if err := storetest.InsertFixture(ctx, db, r); err != nil { // a running record, as if created long ago
			fail(err)
		}
	}
	transitionCost(ctx, db, dbName, ids[0])
	deliveryLag(ctx, db, dbName, org.ID, ids)
}

// transitionCost alternates a field-only update that writes no event with
// one that writes an updated event, on one record.
func transitionCost(ctx context.Context, db *store.DB, dbName, id string) {
	var bare, with []time.Duration
	for i := range 2 * *evTransitions {
		withEvent := i%2 == 1
		t0 := time.Now()
		if _, err := db.Transition(ctx, id, "", "", func(r *store.Record) error {
			r.Diagnostic = strconv.Itoa(i) // a write either way
			if withEvent {
				r.Metadata["n"] = strconv.Itoa(i) // a metadata change: an updated event
			}
			return nil
		}); err != nil {
			fail(err)
		}
		if withEvent {
			with = append(with, time.Since(t0))
		} else {
			bare = append(bare, time.Since(t0))
		}
	}
	fmt.Printf("%-28s p50 %.3f → %.3f ms (%+.3f)   p99 %.3f → %.3f ms (%+.3f; target ≤ +1 ms)   (%s, %d each)\n",
		"transition + its event", ms(pct(bare, 50)), ms(pct(with, 50)), ms(pct(with, 50)-pct(bare, 50)),
		ms(pct(bare, 99)), ms(pct(with, 99)), ms(pct(with, 99)-pct(bare, 99)), dbName, len(bare))
}

// deliveryLag drives evRate transitions per second for evDuration through
// the gate and measures each event's timestamp → its receipt by a webhook
// on loopback, delivered by the events service.
func deliveryLag(ctx context.Context, db *store.DB, dbName, orgID string, ids []string) {
	var mu sync.Mutex
	lags := map[string]time.Duration{} // event id → lag of its first receipt
	dups := 0
	all := make(chan struct{})
	var expected int
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		var ev apitypes.LifecycleEvent
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		if _, seen := lags[ev.Id]; seen {
			dups++
		} else {
			lags[ev.Id] = at.Sub(ev.Timestamp)
			if expected > 0 && len(lags) == expected {
				close(all)
			}
		}
		mu.Unlock()
	}))
	defer recv.Close()
	if err := db.PutWebhook(ctx, &store.Webhook{ID: "wh-bench", OrgID: orgID, Name: "bench", URL: recv.URL, Enabled: true,
		Secret: "bench-secret", CreatedAt: time.Now()}); err != nil {
		fail(err)
	}
	svc := events.New(events.Config{DB: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Delivery: events.DeliveryConfig{AllowPrivate: true}})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Run(sctx) }()
	defer func() { cancel(); <-done }()

	// Paced from one clock: transition i is due at start + i/rate; workers
	// take them in turn so one slow commit does not hold the pace.
	total := int(float64(*evRate) * evDuration.Seconds())
	mu.Lock()
	expected = total
	mu.Unlock()
	due := make(chan int, total)
	start := time.Now()
	go func() {
		defer close(due)
		for i := range total {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(*evRate))); d > 0 {
				time.Sleep(d) // pacing the load, not synchronising
			}
			due <- i
		}
	}()
	parallel(8, func(int) {
		for i := range due {
			id := ids[i%len(ids)]
			if _, err := db.Transition(ctx, id, "", "", func(r *store.Record) error {
				r.Metadata["n"] = strconv.Itoa(i)
				return nil
			}); err != nil {
				fail(err)
			}
		}
	})
	driven := time.Since(start)
	select {
	case <-all:
	case <-time.After(2*time.Minute + *evDuration):
		mu.Lock()
		got := len(lags)
		mu.Unlock()
		fail(fmt.Errorf("events (%s): the receiver got %d of %d events within 2 minutes", dbName, got, total))
	}
	mu.Lock()
	defer mu.Unlock()
	var ds []time.Duration
	for _, d := range lags {
		ds = append(ds, d)
	}
	fmt.Printf("%-28s p50 %6.1f ms   p99 %6.1f ms   max %6.1f ms   (%s, %d transitions at %.0f/s over %d sandboxes, %d redelivered; target p99 ≤ 500 ms)\n",
		"event → webhook receipt", ms(pct(ds, 50)), ms(pct(ds, 99)), ms(pct(ds, 100)), dbName, total,
		float64(total)/driven.Seconds(), len(ids), dups)
}
