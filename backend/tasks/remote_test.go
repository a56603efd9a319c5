package tasks

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// An environment deleted through another replica while this replica's
// worker provisions it: the notification (RemoteChanged) stops the worker
// at once, instead of it provisioning on until its deadline, and the
// environment's resources are removed again once the worker has stopped.
// Without the stop in RemoteChanged the worker stays held in Bring and the
// test fails on its deadline.
func TestRemoteDeleteStopsTheWorker(t *testing.T) {
	g := newTaskRig(t)
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	id := g.create()
	g.eng.bringHook = func(ctx context.Context) error {
		once.Do(func() { close(entered) })
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			// What a provisioning stopped midway leaves: a container made
			// after the other replica removed the environment's.
			g.eng.mu.Lock()
			g.eng.envs[id] = map[string]string{"web": "created"}
			g.eng.mu.Unlock()
			return context.Cause(ctx)
		}
	}
	stepped := make(chan error, 1)
	go func() { stepped <- g.d.Step(context.Background(), id, g.d.Lane(context.Background(), id)) }()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never reached provisioning")
	}

	// The other replica: a Service of its own on the same database and engine.
	peer := &taskRig{t: t, db: g.db, eng: g.eng, clock: g.clock}
	peer.restart()
	if code, m := peer.do(http.MethodDelete, "/"+id, nil); code != http.StatusOK || m["state"] != "torn_down" {
		t.Fatalf("delete on the other replica: %d %v", code, m)
	}
	g.svc.RemoteChanged(id) // what the listener calls on the other replica's commit
	select {
	case err := <-stepped:
		if err != nil {
			t.Fatalf("step: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker still provisions an environment another replica deleted")
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(g.eng.state(id)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("what the stopped worker made is still there: %v", g.eng.state(id))
		}
		time.Sleep(10 * time.Millisecond) // polling the fake engine
	}
	if e, _ := g.env(id); e.State != "torn_down" {
		t.Fatalf("environment %s, want torn_down", e.State)
	}
}
