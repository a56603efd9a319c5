package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

type sandboxView struct {
	SandboxID  string  `json:"sandboxID"`
	State      string  `json:"state"`
	Diagnostic *string `json:"diagnostic"`
	EndAt      string  `json:"endAt"`
}

func getJSON(t *testing.T, b *backendproc.Backend, path string, v any) int {
	t.Helper()
	res, err := b.Do(context.Background(), "GET", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if v != nil && res.StatusCode == 200 {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, data)
		}
	}
	return res.StatusCode
}

func create(b *backendproc.Backend, body string) (sandboxView, error) {
	var sb sandboxView
	res, err := b.Do(context.Background(), "POST", "/sandboxes", strings.NewReader(body))
	if err != nil {
		return sb, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		data, _ := io.ReadAll(res.Body)
		return sb, fmt.Errorf("create: %d %s", res.StatusCode, data)
	}
	return sb, json.NewDecoder(res.Body).Decode(&sb)
}

func deploymentContainers(t *testing.T, cli *client.Client, deployment string, extra ...string) []container.Summary {
	t.Helper()
	args := filters.NewArgs(filters.Arg("label", compute.LabelDeployment+"="+deployment))
	for _, e := range extra {
		args.Add("label", e)
	}
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: args})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestCrashRecovery kills -9 the backend in the middle of 20 creates, meddles
// with the world while it is down, and checks that a restart drives every
// record to a truthful state and leaves no container that should not exist.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := backendproc.Start(t, backendproc.Options{Env: map[string]string{"DREADNODE_RECONCILE_INTERVAL": "200ms"}})
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	// Running before the crash: one that will expire while the backend is
	// down, one whose record will be marked deleted behind its back.
	expiring, err := create(b, `{"timeout": 2, "waitReady": true}`)
	if err != nil || expiring.State != "running" {
		t.Fatalf("expiring sandbox: %v %+v", err, expiring)
	}
	doomed, err := create(b, `{"timeout": 600, "waitReady": true}`)
	if err != nil || doomed.State != "running" {
		t.Fatalf("doomed sandbox: %v %+v", err, doomed)
	}

	// 20 concurrent creates; kill -9 once about half have answered.
	var answered atomic.Int32
	var wg sync.WaitGroup
	killed := make(chan struct{})
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := create(b, `{"timeout": 600}`); err == nil {
				if answered.Add(1) == 10 {
					b.Kill()
					close(killed)
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		b.Kill()
	}
	t.Logf("%d creates answered before the kill", answered.Load())

	// While it is down: an orphan container, a record deleted behind the
	// container's back, and a record stuck in creating past its deadline.
	db, err := store.Open(ctx, filepath.Join(b.DataDir, "dreadnode.db"))
	if err != nil {
		t.Fatal(err)
	}
	deployment, err := db.DeploymentID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := cli.ContainerCreate(ctx, &container.Config{Image: "dreadnode/base:latest", Labels: map[string]string{
		compute.LabelManaged: "true", compute.LabelRecord: "ghostrecord", compute.LabelDeployment: deployment, compute.LabelOrg: "acc", compute.LabelKind: "runtime",
	}}, nil, nil, nil, "dn-ghost-"+deployment)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, orphan.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	// (Through stopping, the only way to an end; no backend runs to carry it out.)
	for _, p := range []sandbox.Phase{sandbox.PhaseStopping, sandbox.PhaseDeleted} {
		if _, err := db.Transition(ctx, doomed.SandboxID, p, sandbox.CauseUser, nil); err != nil {
			t.Fatal(err)
		}
	}
	org, _ := db.OrgByName(ctx, "acc")
	stuck := &store.Record{ID: "stuckrecord" + deployment, OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhaseCreating,
		TemplateID: "base", PhaseDeadline: time.Now().Add(-time.Minute), EndAt: time.Now().Add(time.Hour)}
	if err := storetest.InsertFixture(ctx, db, stuck); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Let the expiring sandbox's endAt pass while nothing runs.
	deadline := time.Now().Add(10 * time.Second)
	for end, _ := time.Parse(time.RFC3339Nano, expiring.EndAt); time.Now().Before(end); {
		if time.Now().After(deadline) {
			t.Fatal("expiring sandbox has no usable endAt")
		}
		time.Sleep(100 * time.Millisecond)
	}

	b.Restart(t)

	// Every record ends truthful: nothing stays starting.
	var all []sandboxView
	poll := time.Now().Add(90 * time.Second)
	for {
		all = nil
		getJSON(t, b, "/sandboxes?state=starting,running,paused,completed,failed,deleted&limit=1000", &all)
		starting := 0
		for _, s := range all {
			if s.State == "starting" {
				starting++
			}
		}
		if starting == 0 {
			break
		}
		if time.Now().After(poll) {
			t.Fatalf("%d records still starting after restart: %+v", starting, all)
		}
		time.Sleep(100 * time.Millisecond)
	}
	running := map[string]bool{}
	for _, s := range all {
		switch s.State {
		case "running":
			running[s.SandboxID] = true
		case "failed":
			if s.Diagnostic == nil || *s.Diagnostic == "" {
				t.Errorf("failed sandbox %s has no diagnostic", s.SandboxID)
			}
		case "deleted":
		default:
			t.Errorf("sandbox %s in unexpected state %s", s.SandboxID, s.State)
		}
	}
	if len(running) < 10 {
		t.Errorf("only %d sandboxes running after recovery; the answered creates must survive", len(running))
	}
	byID := map[string]sandboxView{}
	for _, s := range all {
		byID[s.SandboxID] = s
	}
	if s := byID[expiring.SandboxID]; s.State != "deleted" {
		t.Errorf("the sandbox that expired during the outage is %s, want deleted", s.State)
	}
	if s := byID[stuck.ID]; s.State != "failed" || s.Diagnostic == nil || !strings.Contains(*s.Diagnostic, "did not start within") {
		t.Errorf("the record stuck past its deadline: %+v", s)
	}

	// The containers are exactly the running records' (orphans swept, the
	// deleted and expired ones removed).
	deadline = time.Now().Add(30 * time.Second)
	for {
		cs := deploymentContainers(t, cli, deployment)
		seen := map[string]int{}
		extra := []string{}
		for _, c := range cs {
			id := c.Labels[compute.LabelRecord]
			seen[id]++
			if !running[id] || c.State != "running" {
				extra = append(extra, id+":"+c.State)
			}
		}
		missing := 0
		for id := range running {
			if seen[id] != 1 {
				missing++
			}
		}
		if len(extra) == 0 && missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers do not match the running records: extra %v, %d running records without exactly one container", extra, missing)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Every state is reachable by delete, and nothing is left behind.
	for id := range running {
		res, err := b.Do(ctx, "DELETE", "/sandboxes/"+id, nil)
		if err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("delete %s: %v %v", id, err, res)
		}
		res.Body.Close()
	}
	deadline = time.Now().Add(30 * time.Second)
	for len(deploymentContainers(t, cli, deployment)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("containers left after deleting everything: %d", len(deploymentContainers(t, cli, deployment)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
