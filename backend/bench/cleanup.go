package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// The bench makes hundreds of containers; whichever way it ends (a part
// failing, ^C, success) it removes every one of them. Each thing it makes
// registers its removal here; fail, a signal and the normal end run them all,
// last registered first.
var exits struct {
	sync.Mutex
	next    int
	hooks   map[int]func()
	started bool
	done    chan struct{} // closed when every hook has run
}

// atExit registers f to run when the bench ends, and returns a function
// that runs f now (at most once) and unregisters it.
func atExit(f func()) (runNow func()) {
	var once sync.Once
	run := func() { once.Do(f) }
	exits.Lock()
	defer exits.Unlock()
	if exits.hooks == nil {
		exits.hooks = map[int]func(){}
	}
	id := exits.next
	exits.next++
	exits.hooks[id] = run
	return func() {
		exits.Lock()
		delete(exits.hooks, id)
		exits.Unlock()
		run()
	}
}

// runExits runs every registered removal, newest first, once. A caller
// that comes while another runs them (a part failing because the server
// just closed under it) waits until they are done, so the process never
// exits with removals half-made; the wait is bounded should a removal
// itself have failed the bench.
func runExits() {
	exits.Lock()
	if exits.started {
		done := exits.done
		exits.Unlock()
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
		}
		return
	}
	exits.started = true
	exits.done = make(chan struct{})
	defer close(exits.done)
	var ids []int
	for id := range exits.hooks {
		ids = append(ids, id)
	}
	hooks := exits.hooks
	exits.hooks = nil
	exits.Unlock()
	slices.Sort(ids)
	for _, id := range slices.Backward(ids) { // newest first: ids grow with registration
		hooks[id]()
	}
}

// onSignals cleans up on SIGINT and SIGTERM before exiting, so an
// interrupted bench leaves nothing running either.
func onSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-ch
		fmt.Fprintf(os.Stderr, "bench: %s: removing what the bench made\n", s)
		runExits()
		os.Exit(130)
	}()
}

// removeDeployment force-removes every container, network and volume
// labelled with deployment: the backend's own removal goes through its
// reconciler, which a failed part may have left mid-way.
func removeDeployment(cli *client.Client, deployment string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := dockertest.RemoveDeployment(ctx, cli, deployment); err != nil {
		fmt.Fprintf(os.Stderr, "bench: removing what deployment %s left: %v\n", deployment, err)
	}
}
