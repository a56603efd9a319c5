package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// admissionBurst: *admBurst creates at once, each deleted as soon as it runs,
// through a backend whose capacity is *burstRoom sandboxes, vs *admBurst
// concurrent raw docker runs (create+start, then remove). Both report the
// wall time until every one has run; the raw side also its failures.
func admissionBurst(ctx context.Context, cli *client.Client) {
	b := start(ctx, 0, func(c *app.Config) { c.Capacity.Sandboxes = *burstRoom })
	defer b.close()
	var oursFailed atomic.Int64
	ours := timed(func() {
		parallel(*admBurst, func(int) {
			code, body := b.do("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 600})
			var sb struct{ SandboxID, State string }
			_ = json.Unmarshal(body, &sb)
			for code == http.StatusCreated && sb.State == string(sbx.StateStarting) { // waitReady's server-side limit passed: keep waiting
				time.Sleep(100 * time.Millisecond)
				var g []byte
				_, g = b.do("GET", "/sandboxes/"+sb.SandboxID, nil)
				_ = json.Unmarshal(g, &sb)
			}
			if code != http.StatusCreated || sb.State != string(sbx.StateRunning) {
				oursFailed.Add(1)
			}
			if sb.SandboxID != "" {
				b.do("DELETE", "/sandboxes/"+sb.SandboxID, nil)
			}
		})
	})
	var rawFailed atomic.Int64
	var firstErr atomic.Value
	raw := timed(func() {
		parallel(*admBurst, func(i int) {
			if err := rawRun(ctx, cli, fmt.Sprintf("bench-rawb-%d-%s", i, ids.New())); err != nil {
				rawFailed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		})
	})
	removeRaw(ctx, cli)
	fmt.Printf("%-28s ours %8.1f ms (%d failed; capacity %d)   raw %8.1f ms (%d failed)   ratio %.2f×\n",
		fmt.Sprintf("burst of %d creates", *admBurst), ms(ours), oursFailed.Load(), *burstRoom, ms(raw), rawFailed.Load(), float64(ours)/float64(raw))
	if e := firstErr.Load(); e != nil {
		fmt.Printf("%-28s first raw failure: %s\n", "", e)
	}
}

// rawRun is rawCreateStart without failing the bench, then a forced remove.
func rawRun(ctx context.Context, cli *client.Client, name string) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // as the backend's create deadline
	defer cancel()
	cfg, hc := rawConfig()
	c, err := cli.ContainerCreate(rctx, cfg, hc, nil, nil, name)
	if err != nil {
		return err
	}
	defer func() {
		_ = cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	}()
	return cli.ContainerStart(rctx, c.ID, container.StartOptions{})
}

var errRollback = errors.New("rollback")

// admissionOverhead is what placing a create costs when there is room: the
// p50 of a write transaction that runs Admitter.Place, minus that of the
// same transaction without it, next to the cold create p50.
func admissionOverhead(ctx context.Context, b *backend, cold []time.Duration) {
	const n = 300
	var with, without []time.Duration
	for range n {
		for _, place := range []bool{true, false} {
			rec := &store.Record{ID: ids.New(), OrgID: "bench", Provider: "docker", CPUCount: 1, MemoryMB: 512}
			t0 := time.Now()
			err := b.app.DB.Tx(ctx, func(tx *sql.Tx) error {
				if place {
					if err := b.app.Admission.Place(ctx, tx, rec); err != nil {
						return err
					}
				}
				return errRollback
			})
			d := time.Since(t0)
			if !errors.Is(err, errRollback) {
				fail(fmt.Errorf("placing a create: %v", err))
			}
			if place {
				with = append(with, d)
			} else {
				without = append(without, d)
			}
		}
	}
	over := pct(with, 50) - pct(without, 50)
	coldP50 := "not measured (part cold not run)"
	if len(cold) > 0 {
		coldP50 = fmt.Sprintf("%.1f ms", ms(pct(cold, 50)))
	}
	fmt.Printf("%-28s p50 %8.3f ms   p95 %8.3f ms   (target p50 ≤ 5 ms; cold create p50 %s)\n", "admission per create (room)",
		ms(over), ms(pct(with, 95)-pct(without, 95)), coldP50)
}
