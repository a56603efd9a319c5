package scaleout_test

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

// allStates lists every record of the org, whatever its state.
const allStates = "/sandboxes?state=starting,running,paused,completed,failed,deleted&limit=1000"

// TestReplicaKilledMidCreates: three replicas share 60 creates round-robin;
// one is SIGKILLed after a third have been acknowledged. The survivors take
// over its in-flight creates: every record ends running (or failed with a
// diagnostic), each running record has exactly one container and each
// failed one none, and every surviving replica answers the same for every
// record.
func TestReplicaKilledMidCreates(t *testing.T) {
	t.Parallel()
	s := replicas.Start(t, replicas.Options{N: 3})
	const total, killAt, victim = 60, 20, 1

	var (
		mu     sync.Mutex
		acked  []string
		killed bool
		errs   []string
	)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				mu.Lock()
				target := s.Replicas[i%len(s.Replicas)]
				if killed && i%len(s.Replicas) == victim {
					target = s.Replicas[(i+1)%len(s.Replicas)] // round-robin over the survivors
				}
				mu.Unlock()
				id, err := create(target, 90*time.Second)
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					acked = append(acked, id)
					if len(acked) == killAt && !killed {
						killed = true
						s.Kill(victim) // in flight: whatever its other workers sent
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if !killed {
		t.Fatalf("only %d of %d creates were acknowledged (errors: %v)", len(acked), total, errs)
	}
	// Only creates sent to the victim may go unanswered: it died under them.
	if len(acked) < total-12 {
		t.Fatalf("%d of %d creates acknowledged; only the victim's in-flight ones may fail: %v", len(acked), total, errs)
	}
	t.Logf("%d creates acknowledged, %d lost with the victim", len(acked), len(errs))

	survivors := s.Alive()
	// Records the victim inserted but never answered for are work too.
	ids := map[string]bool{}
	for _, id := range acked {
		ids[id] = true
	}
	var listed []view
	if _, err := call(survivors[0], 10*time.Second, http.MethodGet, allStates, "", &listed); err != nil {
		t.Fatal(err)
	}
	for _, v := range listed {
		ids[v.SandboxID] = true
	}
	for _, id := range acked {
		if !containsID(listed, id) {
			t.Errorf("acknowledged sandbox %s is missing from the list on %s", id, survivors[0].URL)
		}
	}

	// Docker is the bottleneck: a loaded engine starts a container in seconds.
	final := waitAgreed(t, s, survivors, ids, 5*time.Minute)
	for id, v := range final {
		switch v.State {
		case "running":
		case "failed":
			if v.Diagnostic == "" {
				t.Errorf("sandbox %s failed without a diagnostic", id)
			}
		default:
			t.Errorf("sandbox %s ended %s; a create ends running or failed", id, v.State)
		}
	}
	waitContainers(t, s, final, s.TakeOver()*2+30*time.Second)
}

func containsID(vs []view, id string) bool {
	for _, v := range vs {
		if v.SandboxID == id {
			return true
		}
	}
	return false
}

// waitAgreed polls every replica for every record until each record is
// settled and all replicas answer the same state, and returns that state.
func waitAgreed(t *testing.T, s *replicas.Set, reps []*backendproc.Backend, ids map[string]bool, within time.Duration) map[string]view {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		final, problems, stuck := map[string]view{}, []string(nil), []string(nil)
		for id := range ids {
			first := get(t, reps[0], id)
			final[id] = first
			if !settled(first.State) {
				problems = append(problems, id+" is "+first.State+" on "+reps[0].URL)
				stuck = append(stuck, id)
				continue
			}
			for _, b := range reps[1:] {
				if v := get(t, b, id); v.State != first.State {
					problems = append(problems, id+" is "+first.State+" on "+reps[0].URL+" but "+v.State+" on "+b.URL)
				}
			}
		}
		if len(problems) == 0 {
			return final
		}
		if time.Now().After(deadline) {
			sort.Strings(problems)
			leases := s.Leases(t, stuck)
			reps[0].DumpStacks() // its goroutines, in its output below, show where the work is stuck
			t.Fatalf("after %s, %d records are unsettled or read differently across replicas:\n%s\nin the database:\n%s",
				within, len(problems), strings.Join(problems, "\n"), leases)
		}
		time.Sleep(200 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// waitContainers polls the engine until each running record has exactly one
// container and every other record none, and no container belongs to a
// record outside want: the orphan sweeps get their chance to remove a
// duplicate, but one that stays is an error.
func waitContainers(t *testing.T, s *replicas.Set, want map[string]view, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var problems []string
		byRecord := s.Containers(t)
		for id, v := range want {
			n := len(byRecord[id])
			if v.State == "running" && n != 1 {
				problems = append(problems, id+" is running with "+itoa(n)+" containers")
			}
			if v.State != "running" && n != 0 {
				problems = append(problems, id+" is "+v.State+" but has "+itoa(n)+" containers")
			}
		}
		for id, cs := range byRecord {
			if id == "" {
				// The engine's helpers (the disk-limit probe, the agent
				// volume's filler) serve no record; one a killed replica
				// left behind is not a sandbox (see the stop's note).
				continue
			}
			if _, ok := want[id]; !ok {
				problems = append(problems, "container "+cs[0].ID[:12]+" belongs to unknown record "+id)
			}
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(problems)
			t.Fatalf("after %s, containers do not match the records:\n%s", within, strings.Join(problems, "\n"))
		}
		time.Sleep(200 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
