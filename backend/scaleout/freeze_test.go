package scaleout_test

import (
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

// TestFrozenReplicaActsOnNothingItLost freezes replica A (SIGSTOP) while it
// holds creates and deletes, lets replica B take them over once A's leases
// run out, then thaws A (SIGCONT). A must start, delete and bill nothing it
// no longer holds: no record with two containers, no deleted sandbox whose
// container comes back, and the org is charged exactly what its records say
// they were billed.
func TestFrozenReplicaActsOnNothingItLost(t *testing.T) {
	t.Parallel()
	// Settling often makes it likely that A is frozen holding a settlement.
	s := replicas.Start(t, replicas.Options{N: 2, Env: map[string]string{"DREADNODE_SETTLE_INTERVAL": "300ms"}})
	replicaLosesItsWork(t, s, func() { s.Freeze(t, 0) }, func() { s.Thaw(t, 0) })
}

// replicaLosesItsWork is the scenario of the frozen and the cut replica:
// replica A (s.Replicas[0]) is isolated while it holds creates and deletes,
// B takes them over once A's leases ran out, A rejoins, and must then have
// started, deleted and billed nothing it no longer held.
func replicaLosesItsWork(t *testing.T, s *replicas.Set, isolate, rejoin func()) {
	t.Helper()
	a, b := s.Replicas[0], s.Replicas[1]
	credits0 := micro(balance(t, a))

	// Running sandboxes that A will be asked to delete.
	var doomed []string
	for range 4 {
		id, err := createReady(a)
		if err != nil {
			t.Fatal(err)
		}
		doomed = append(doomed, id)
	}

	// In flight on A: 8 creates and the 4 deletes. A is frozen as soon as
	// the deletes and half the creates are acknowledged, so it is likely in
	// the middle of starting and removing containers.
	var (
		wg           sync.WaitGroup
		createsAcked atomic.Int32
		deletesAcked atomic.Int32
		ackedMu      sync.Mutex
		acked        []string
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Long enough to be answered after A rejoined.
			if id, err := create(a, 3*time.Minute); err == nil {
				createsAcked.Add(1)
				ackedMu.Lock()
				acked = append(acked, id)
				ackedMu.Unlock()
			}
		}()
	}
	for _, id := range doomed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, err := call(a, 3*time.Minute, http.MethodDelete, "/sandboxes/"+id, "", nil); err == nil && code == http.StatusNoContent {
				deletesAcked.Add(1)
			}
		}()
	}
	pollUntil(t, time.Minute, "A acknowledging the deletes and half the creates", func() bool {
		return deletesAcked.Load() == int32(len(doomed)) && createsAcked.Load() >= 4
	})
	isolate()
	frozenAt := time.Now()

	// B alone finishes everything A held.
	ids := map[string]bool{}
	var listed []view
	if _, err := call(b, 10*time.Second, http.MethodGet, allStates, "", &listed); err != nil {
		t.Fatal(err)
	}
	for _, v := range listed {
		ids[v.SandboxID] = true
	}
	final := waitAgreed(t, s, []*backendproc.Backend{b}, ids, 4*time.Minute)
	for _, id := range doomed {
		if final[id].State != "deleted" {
			t.Errorf("sandbox %s was deleted through A but B shows it %s:\n%s\n%s", id, final[id].State, raw(b, id), s.Leases(t, []string{id}))
		}
	}
	waitContainers(t, s, final, s.TakeOver()*2+30*time.Second)
	t.Logf("B finished A's work %s after A was isolated (lease TTL %s)", time.Since(frozenAt).Round(time.Millisecond), s.LeaseTTL)
	// Keep A isolated well past its lease, whatever B's speed.
	pollUntil(t, time.Minute, "A's lease running out", func() bool { return time.Since(frozenAt) > 2*s.LeaseTTL })

	rejoin()
	thawedAt := time.Now()
	// Connections to A kept alive from before it was isolated are stale: A
	// closes them on its idle timeout as soon as it runs again, and a POST
	// written into one at that moment is reset, never retried (not
	// idempotent). Its clients start afresh, as a load balancer's would.
	http.DefaultClient.CloseIdleConnections()
	// A works again: a create sent to it is driven to running.
	canary, err := createReady(a)
	if err != nil {
		t.Fatalf("A does not work after it rejoined: %v\n%s", err, a.Logs())
	}
	final[canary] = view{SandboxID: canary, State: "running"}
	waitDone(t, &wg, 3*time.Minute)
	ackedMu.Lock()
	for _, id := range acked {
		if _, ok := final[id]; !ok {
			t.Errorf("create %s was acknowledged by A but never listed", id)
		}
	}
	ackedMu.Unlock()

	// For several take-over periods after A rejoined, nothing A held comes
	// back: every sample matches the settled states.
	observe(t, s, []*backendproc.Backend{a, b}, final, 3*s.TakeOver())
	t.Logf("observed %s after A rejoined", time.Since(thawedAt).Round(time.Millisecond))

	// Billing: with everything deleted, the org was charged exactly the sum
	// of what its records were billed, once.
	for id, v := range final {
		if v.State == "running" {
			if _, err := call(b, time.Minute, http.MethodDelete, "/sandboxes/"+id, "", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	var charged, billed int64
	var open []string
	deadline := time.Now().Add(time.Minute)
	for {
		billed, open = 0, nil
		for _, r := range ledger(t, b) {
			billed += micro(r.BilledCredits)
			if r.State != "killed" {
				open = append(open, r.ID+" "+r.State)
			}
		}
		charged = credits0 - micro(balance(t, b))
		if len(open) == 0 && charged == billed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after deleting everything: the org was charged %d µcredits, its records say %d; records not killed: %v",
				charged, billed, open)
		}
		time.Sleep(100 * time.Millisecond) // poll interval, bounded by the deadline
	}
	t.Logf("charged %d µcredits for %d records", charged, len(final))
}

func createReady(b *backendproc.Backend) (string, error) {
	var v view
	if _, err := call(b, 3*time.Minute, http.MethodPost, "/sandboxes", `{"timeout": 600, "waitReady": true}`, &v); err != nil {
		return "", err
	}
	if v.State != "running" {
		return "", errorf("create with waitReady on %s answered %s (%s)", b.URL, v.State, v.Diagnostic)
	}
	return v.SandboxID, nil
}

// observe samples states on every replica and the engine's containers for
// the whole window, failing at the first sample that differs from want.
func observe(t *testing.T, s *replicas.Set, reps []*backendproc.Backend, want map[string]view, window time.Duration) {
	t.Helper()
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		var problems []string
		byRecord := s.Containers(t)
		for id, v := range want {
			n := len(byRecord[id])
			if v.State == "running" && n != 1 || v.State != "running" && n != 0 {
				problems = append(problems, id+" is "+v.State+" with "+itoa(n)+" containers")
			}
			for _, r := range reps {
				if got := get(t, r, id); got.State != v.State {
					problems = append(problems, id+" was "+v.State+" but "+r.URL+" now shows "+got.State)
				}
			}
		}
		for id := range byRecord {
			if _, ok := want[id]; !ok {
				problems = append(problems, "a container belongs to unknown record "+id)
			}
		}
		if len(problems) > 0 {
			sort.Strings(problems)
			t.Fatalf("after A rejoined:\n%s", strings.Join(problems, "\n"))
		}
		time.Sleep(200 * time.Millisecond) // sampling interval of a fixed window
	}
}

// pollUntil polls cond until it holds or within passes.
func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func waitDone(t *testing.T, wg *sync.WaitGroup, within time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("requests sent to A before it was isolated are still unanswered %s after", within)
	}
}

// micro converts credits (six decimals on the wire) to exact µcredits.
func micro(c float64) int64 { return int64(math.Round(c * 1e6)) }
