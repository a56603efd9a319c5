package scaleout_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

// TestWaitReadyWokenByAnotherReplica (the test 4, real processes):
// a create with waitReady is sent to replica A, whose engine calls go
// through a proxy that holds the container create; A is frozen (SIGSTOP)
// in the middle of it, B takes the create over once A's lease ran out and
// starts the container on the real engine; A is thawed (its own create is
// refused) and its waitReady answers running, B's work, not a failure of
// its own. The record has exactly one container, B's, and both replicas
// read running. (That a waiter is woken by the other replica's commit
// itself, not by its one-second re-read, is asserted in process by
// app.TestWaitReadyWokenByOtherReplica: a frozen process cannot tell.)
func TestWaitReadyWokenByAnotherReplica(t *testing.T) {
	t.Parallel()
	proxy := startEngineProxy(t)
	// B joins once A holds the create: started together, B could claim
	// the new record first (it hears of it at once) and drive it itself.
	s := replicas.Start(t, replicas.Options{N: 1, Env: map[string]string{"DOCKER_HOST": proxy.Host}})
	a := s.Replicas[0]
	proxy.Hold()

	type answer struct {
		code int
		v    view
		err  error
	}
	answered := make(chan answer, 1)
	sent := time.Now()
	go func() {
		var v view
		code, err := call(a, 3*time.Minute, http.MethodPost, "/sandboxes", `{"timeout": 600, "waitReady": true}`, &v)
		answered <- answer{code, v, err}
	}()
	pollUntil(t, time.Minute, "A to reach the engine with its create", func() bool { return proxy.Held() == 1 })
	b := s.Add(t, map[string]string{"DOCKER_HOST": os.Getenv("DOCKER_HOST")}) // the engine itself
	s.Freeze(t, 0)
	thawed := false
	defer func() {
		if !thawed {
			s.Thaw(t, 0)
		}
	}()

	var listed []view
	pollUntil(t, 10*time.Second, "B to list the record A inserted", func() bool {
		_, err := call(b, 10*time.Second, http.MethodGet, allStates, "", &listed)
		return err == nil && len(listed) == 1
	})
	id := listed[0].SandboxID
	pollUntil(t, s.TakeOver()+2*time.Minute, "B to take the create over and run it", func() bool {
		return get(t, b, id).State == "running"
	})
	select {
	case r := <-answered:
		t.Fatalf("A answered while frozen: %+v", r)
	default:
	}

	proxy.Refuse() // A's own create, still at the engine's door, fails after A lost the record
	s.Thaw(t, 0)
	thawed = true
	thawedAt := time.Now()
	var r answer
	select {
	case r = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatalf("waitReady on A did not return within 30s of its thaw, after B ran the sandbox\n%s", raw(b, id))
	}
	if r.err != nil || r.code != http.StatusCreated || r.v.SandboxID != id || r.v.State != "running" {
		t.Fatalf("waitReady on A answered %d %+v (%v), want 201 running %s\n%s", r.code, r.v, r.err, id, raw(b, id))
	}
	t.Logf("waitReady on A answered %s after its thaw (%s after it was sent)", time.Since(thawedAt).Round(time.Millisecond), time.Since(sent).Round(time.Millisecond))

	for name, rep := range map[string]int{"A": 0, "B": 1} {
		if got := get(t, s.Replicas[rep], id); got.State != "running" {
			t.Errorf("%s reads %s after waitReady answered running", name, got.State)
		}
	}
	pollUntil(t, time.Minute, "the record's containers to settle", func() bool {
		cs := s.Containers(t)[id]
		return len(cs) == 1 && cs[0].State == "running"
	})
}
