package tasks_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
)

// An environment's network goes through FilterNetwork (the host's egress
// rules) before its services run; a network that cannot be filtered fails
// the environment rather than run it unfiltered.
func TestEnvironmentNetworkIsFiltered(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var filtered []string
	h := newHarness(t, func(c *tasks.Config) {
		c.Groups = dockerGroups(docker.GroupConfig{FilterNetwork: func(_ context.Context, id string, _ []string) error {
			mu.Lock()
			defer mu.Unlock()
			filtered = append(filtered, id)
			return nil
		}})
	})
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "private-task"})
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	nets := h.networks(id)
	mu.Lock()
	got := append([]string(nil), filtered...)
	mu.Unlock()
	if len(nets) != 1 || len(got) == 0 || got[0] != nets[0].ID {
		t.Fatalf("filtered %v, want the environment's network %v", got, nets)
	}

	broken := newHarness(t, func(c *tasks.Config) {
		c.Groups = dockerGroups(docker.GroupConfig{FilterNetwork: func(context.Context, string, []string) error { return errors.New("no nft on this host") }})
	})
	bad, _ := broken.create("acme", "ws", map[string]any{"task_ref": "private-task"})
	if msg := broken.waitFailed("acme", "ws", bad, readyTimeout); !strings.Contains(msg, "no nft on this host") {
		t.Fatalf("the failure does not say why: %q", msg)
	}
	if cs := broken.containers(bad); len(cs) != 0 {
		t.Fatalf("services run on an unfiltered network: %v", cs)
	}
}
