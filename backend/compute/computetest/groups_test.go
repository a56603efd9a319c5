package computetest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
)

func twoServices(id string) *compute.Group {
	return &compute.Group{GroupTarget: compute.GroupTarget{ID: id, RecordID: "rec-" + id, OrgID: "org1", TaskRef: "org1/demo@1"},
		Services: map[string]compute.GroupService{
			"web":      {Image: "web:1", Template: "tpl-web", DependsOn: map[string]compute.Condition{"db": compute.ConditionHealthy}},
			"db":       {Image: "db:1", Template: "tpl-db"},
			"attacker": {Image: "attacker:1", Template: "tpl-attacker"},
		},
		Expose: map[string]int{"web": 8080}}
}

// The fake keeps every promise of the group capability.
func TestFakeGroupsSuite(t *testing.T) {
	t.Parallel()
	computetest.GroupSuite(t, computetest.NewGroups(true), twoServices("g1"), "attacker")
	computetest.GroupSuite(t, computetest.NewGroups(false), twoServices("g2"), "attacker")
}

// Services start after their dependencies; a cycle never starts.
func TestFakeGroupsDependencyOrder(t *testing.T) {
	t.Parallel()
	f := computetest.NewGroups(true)
	ctx := context.Background()
	g := twoServices("g3")
	g.Services["setup"] = compute.GroupService{Image: "setup:1"}
	db := g.Services["db"]
	db.DependsOn = map[string]compute.Condition{"setup": compute.ConditionCompleted, "optional": compute.ConditionStarted}
	g.Services["db"] = db
	res, err := f.Bring(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	order := f.Started()
	if slices.Index(order, "g3/setup") > slices.Index(order, "g3/db") || slices.Index(order, "g3/db") > slices.Index(order, "g3/web") {
		t.Fatalf("start order %v", order)
	}
	if !slices.Equal(res.OneShots, []string{"setup"}) {
		t.Fatalf("one-shots %v", res.OneShots)
	}
	cyc := twoServices("g4")
	db = cyc.Services["db"]
	db.DependsOn = map[string]compute.Condition{"web": compute.ConditionStarted}
	cyc.Services["db"] = db
	var se *compute.ServiceError
	if _, err := f.Bring(ctx, cyc); !errors.As(err, &se) {
		t.Fatalf("a cycle: %v", err)
	}
}

// Images: only the missing ones are built; a service without a build whose
// image is absent is a build error naming it.
func TestFakeGroupsBuild(t *testing.T) {
	t.Parallel()
	f := computetest.NewGroups(true)
	ctx := context.Background()
	imgs := map[string]*compute.Image{"web": {Service: "web", Ref: "web:h1", Build: true}}
	if n, err := f.Build(ctx, imgs); err != nil || n != 1 || f.Builds() != 1 {
		t.Fatalf("build: %d %v (%d)", n, err, f.Builds())
	}
	if missing, _ := f.Missing(ctx, imgs); len(missing) != 0 {
		t.Fatalf("missing after the build: %v", missing)
	}
	imgs["db"] = &compute.Image{Service: "db", Ref: "db:1"}
	var be *compute.BuildError
	if _, err := f.Build(ctx, imgs); !errors.As(err, &be) || be.Service != "db" {
		t.Fatalf("absent image: %v", err)
	}
}

// A held removal keeps the group's members until released: a caller can
// tell "asked" from "removed".
func TestFakeGroupsSlowRemove(t *testing.T) {
	t.Parallel()
	f := computetest.NewGroups(true)
	ctx := context.Background()
	if _, err := f.Bring(ctx, twoServices("g5")); err != nil {
		t.Fatal(err)
	}
	hold := computetest.NewRemoveHold()
	held := hold.Wrap(f)
	done := make(chan error, 1)
	go func() { done <- held.Remove(ctx, "g5") }()
	select {
	case id := <-hold.Removing():
		if id != "g5" {
			t.Fatalf("removing %s", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the removal never started")
	}
	if f.Members("g5") == nil {
		t.Fatal("a held removal removed the members")
	}
	hold.Release()
	if err := <-done; err != nil || f.Members("g5") != nil {
		t.Fatalf("released removal: %v, left %v", err, f.Members("g5"))
	}
}
