package docker

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// TestGroupLabelsNameTheDeployment (issue 33): a task environment's
// containers and network carry the deployment label, as every container
// of a deployment does (README). Seen failing before: the label was absent.
func TestGroupLabelsNameTheDeployment(t *testing.T) {
	t.Parallel()
	g, ctx, id := groupTest(t, "gl")
	res := bringGroup(ctx, t, g, id, map[string]compute.GroupService{"app": baseService()})
	c, err := g.cli.ContainerInspect(ctx, res.Containers["app"])
	if err != nil {
		t.Fatal(err)
	}
	n, err := g.cli.NetworkInspect(ctx, compute.GroupNetworkName(id), network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, labels := range map[string]map[string]string{"container": c.Config.Labels, "network": n.Labels} {
		if got := labels[compute.LabelDeployment]; got != g.Owner() {
			t.Errorf("the service's %s has %s=%q, want the deployment %q", what, compute.LabelDeployment, got, g.Owner())
		}
	}
	// The label does not make a task service one of the deployment's
	// sandboxes: the sandbox provider's List (the orphan sweep's input)
	// leaves it to its group.
	insts, err := newProvider(t, Config{Network: testNetwork, Scope: g.Owner()}).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		if in.Ref.ID == c.ID {
			t.Errorf("the sandbox provider of deployment %s lists the task service %s as its own", g.Owner(), c.ID)
		}
	}
	// A task service's address is claimed at start like a sandbox's.
	ip := agentIP(c)
	if got, want := neighbourOf(t, ip), strings.ToLower(c.NetworkSettings.Networks[compute.GroupNetworkName(id)].MacAddress); got != want {
		t.Errorf("right after Bring the host's neighbour entry for %s holds %q, want the service's %s", ip, got, want)
	}
}

// A task service's die event is its group's, not a sandbox record's: with
// the deployment label it passes the sandbox watch's filter, and must not
// wake the record it names as if a sandbox had exited.
func TestWatchLeavesTaskServicesToTheirGroup(t *testing.T) {
	sandbox := events.Message{Action: events.ActionDie, Actor: events.Actor{ID: "c1", Attributes: map[string]string{"name": "dn-rec1", compute.LabelRecord: "rec1"}}}
	if ev, ok := toEvent(sandbox); !ok || ev.RecordID != "rec1" {
		t.Fatalf("a sandbox's die event: %+v %v, want record rec1", ev, ok)
	}
	service := events.Message{Action: events.ActionDie, Actor: events.Actor{ID: "c2", Attributes: map[string]string{
		"name": "dn-env1-app", compute.LabelGroup: "env1", compute.LabelRecord: "rec2"}}}
	if ev, ok := toEvent(service); ok {
		t.Errorf("a task service's die event became %+v", ev)
	}
}
