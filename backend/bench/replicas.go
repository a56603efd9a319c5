package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

var (
	replicaCreates = flag.Int("replica-creates", 300, "creates per side of the replicas part")
	replicaClients = flag.Int("replica-clients", 48, "concurrent clients of the replicas part")
	takeoverN      = flag.Int("takeover-creates", 20, "creates in flight on the killed replica (takeover part)")
	benchLeaseTTL  = flag.Duration("lease-ttl", 2*time.Second, "DREADNODE_LEASE_TTL of the replicas and takeover parts")
	benchSweep     = flag.Duration("sweep", 200*time.Millisecond, "DREADNODE_RECONCILE_INTERVAL of the replicas and takeover parts")
	e2bCreateTime  = flag.Duration("e2b-create-latency", 500*time.Millisecond, "response time of the E2B fake's create (the cloud's, ~0 locally) in the replicas part")
)

// replicaParts runs the scale-out measurements (API.md §8) against the E2B
// fake, so that Docker is not what limits them: real backend processes on
// one throwaway PostgreSQL cluster.
func replicaParts() {
	if !want("replicas") && !want("takeover") {
		return
	}
	tb := newBenchTB("replicas")
	defer tb.close()
	fake := e2bfake.New(tb)
	cluster, err := pgtest.StartCluster()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() { _ = cluster.Stop() })
	if want("replicas") {
		// A replica keeps a bounded number of creates in flight (its create
		// lane); with the cloud's response time the part measures how that
		// work is shared, not how fast 2 cores run 3 processes.
		fake.SetLatency(e2bfake.RouteCreate, *e2bCreateTime)
		replicaThroughput(tb, fake, cluster)
		fake.SetLatency(e2bfake.RouteCreate, 0)
	}
	if want("takeover") {
		takeover(tb, fake, cluster)
	}
}

func startReplicas(tb *benchTB, fake *e2bfake.Server, cluster *pgtest.Cluster, n int) *replicas.Set {
	url, err := cluster.CreateDatabase(context.Background())
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return replicas.Start(tb, replicas.Options{N: n, DatabaseURL: url, LeaseTTL: *benchLeaseTTL, Interval: *benchSweep,
		Env: map[string]string{
			"DREADNODE_PROVIDER": "e2b", "E2B_API_KEY": fake.APIKey, "E2B_API_URL": fake.URL, "E2B_DOMAIN": fake.Domain,
			// Admission must not be what limits the measurement.
			"DREADNODE_CAPACITY_SANDBOXES": "100000", "DREADNODE_MAX_QUEUE": "100000",
		}})
}

func stopAll(s *replicas.Set, fake *e2bfake.Server) {
	for _, b := range s.Replicas {
		b.Stop()
	}
	for _, sb := range fake.Sandboxes() {
		fake.Kill(sb.ID)
	}
}

// replicaThroughput: creates→running per second through 3 replicas vs 1,
// the same clients spread round-robin.
func replicaThroughput(tb *benchTB, fake *e2bfake.Server, cluster *pgtest.Cluster) {
	rate := func(n int) float64 {
		s := startReplicas(tb, fake, cluster, n)
		defer stopAll(s, fake)
		createBurst(tb, s.Replicas, *replicaClients) // warm-up: connections, caches
		d := timed(func() { createBurst(tb, s.Replicas, *replicaCreates) })
		return float64(*replicaCreates) / d.Seconds()
	}
	one := rate(1)
	three := rate(3)
	fmt.Printf("%-28s 1 replica %7.1f/s   3 replicas %7.1f/s   ratio %.2f× (target ≥ 2.5×; E2B create latency %v)\n",
		fmt.Sprintf("%d creates→running (E2B)", *replicaCreates), one, three, three/one, *e2bCreateTime)
}

// createBurst sends n creates with waitReady through reps round-robin from
// replicaClients clients; any failure ends the bench.
func createBurst(tb *benchTB, reps []*backendproc.Backend, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, *replicaClients) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				b := reps[int(i)%len(reps)]
				if _, err := createOn(b, `{"timeout": 600, "waitReady": true}`, string(sbx.StateRunning)); err != nil {
					tb.Fatalf("%v", err)
				}
			}
		}()
	}
	wg.Wait()
}

func createOn(b *backendproc.Backend, body, state string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := b.Do(ctx, http.MethodPost, "/sandboxes", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var v struct{ SandboxID, State string }
	if err := decodeJSON(res, &v); err != nil {
		return "", fmt.Errorf("create on %s: %w", b.URL, err)
	}
	if res.StatusCode != http.StatusCreated || (state != "" && v.State != state) {
		return "", fmt.Errorf("create on %s: %d, state %q", b.URL, res.StatusCode, v.State)
	}
	return v.SandboxID, nil
}

// takeover: a replica holding creates in flight (held at E2B) is killed;
// the time until the survivors have driven all of them to running, against
// the bound of API.md §8, lease TTL + one sweep.
func takeover(tb *benchTB, fake *e2bfake.Server, cluster *pgtest.Cluster) {
	s := startReplicas(tb, fake, cluster, 3)
	defer stopAll(s, fake)
	victim, survivor := s.Replicas[0], s.Replicas[1]
	release := fake.Hold(e2bfake.RouteCreate)
	var ids []string
	for range *takeoverN {
		id, err := createOn(victim, `{"timeout": 600}`, "")
		if err != nil {
			tb.Fatalf("%v", err)
		}
		ids = append(ids, id)
	}
	deadline := time.Now().Add(time.Minute)
	for fake.Held() < *takeoverN { // the victim is inside E2B's create for each
		if time.Now().After(deadline) {
			tb.Fatalf("only %d of %d creates reached E2B within a minute", fake.Held(), *takeoverN)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline
	}
	killed := time.Now()
	s.Kill(0)
	release()
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	deadline = time.Now().Add(10*s.TakeOver() + time.Minute)
	for len(pending) > 0 {
		for id := range pending {
			if stateOf(tb, survivor, id) == string(sbx.StateRunning) {
				delete(pending, id)
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d creates of the killed replica are not running after %s", len(pending), *takeoverN, time.Since(killed))
		}
		time.Sleep(20 * time.Millisecond) // poll interval, bounded by the deadline
	}
	took := time.Since(killed)
	fmt.Printf("%-28s %8.1f ms   bound (lease TTL %s + sweep %s) %8.1f ms   ratio %.2f× (target ≤ 1×)\n",
		fmt.Sprintf("take-over of %d creates", *takeoverN), ms(took), s.LeaseTTL, s.Interval, ms(s.TakeOver()),
		float64(took)/float64(s.TakeOver()))
}

func stateOf(tb *benchTB, b *backendproc.Backend, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.Do(ctx, http.MethodGet, "/sandboxes/"+id, nil)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	defer res.Body.Close()
	var v struct{ State string }
	if err := decodeJSON(res, &v); err != nil {
		tb.Fatalf("GET %s on %s: %v", id, b.URL, err)
	}
	return v.State
}

func decodeJSON(res *http.Response, v any) error {
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%d %v: %s", res.StatusCode, err, data)
	}
	return nil
}
