package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
)

var (
	forkLayers = flag.String("fork-layers", "10,100,1000", "part fork: sizes in MB of the writable layers snapshotted")
	forkCount  = flag.Int("fork-count", 10, "part fork: sandboxes of one fork, against as many concurrent cold creates")
	forkEnvs   = flag.Int("fork-envs", 10, "part fork: task environments of one fork, against as many fresh creates of the task (cached build)")
)

const benchEnvs = "/api/v1/org/bench/ws/bench/environments"

// forkPart measures fork (API.md §14): the checkpoint's time and image size
// by the size of the writable layer; one fork → running against one cold
// create; a fork of -fork-count against as many concurrent cold creates
// (goal ≤ 1.0×); a web-login environment forked -fork-envs times → all
// ready against as many fresh creates of web-login with its build cached
// (goal ≤ 0.5×).
func forkPart(ctx context.Context) {
	// Networks made ahead for the environment forks (the engine makes
	// networks one at a time: without them the last of the forks waits for
	// every other's network).
	b := start(ctx, 0, func(c *app.Config) { c.TasksDir = "tasks"; c.TaskNetworkPool = *forkEnvs })
	dep, err := b.app.DB.DeploymentID(ctx)
	if err != nil {
		fail(err)
	}
	defer func() {
		b.close()
		// The close removes the backend's containers without ending their
		// records: the checkpoints' images are removed here.
		removeCheckpoints(ctx, dep)
	}()
	committer, ok := b.app.Provider.(compute.Committer)
	if !ok {
		fail(fmt.Errorf("the bench's provider cannot commit"))
	}
	for _, f := range strings.Split(*forkLayers, ",") {
		mb, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || mb <= 0 {
			fail(fmt.Errorf("-fork-layers: %q is not a size in MB", f))
		}
		b.createRunning()
		id := b.ids[len(b.ids)-1]
		rec, err := b.app.DB.GetRecord(ctx, id)
		if err != nil {
			fail(err)
		}
		if _, err := b.app.Provider.Exec(ctx, rec.Ref(), compute.ExecRequest{Cmd: []string{"sh", "-c",
			fmt.Sprintf("head -c %d /dev/urandom > /root/blob", mb<<20)}, Timeout: 10 * time.Minute}); err != nil {
			fail(err)
		}
		t0 := time.Now()
		img, err := committer.Commit(ctx, rec.Ref(), compute.CommitOptions{Name: lifecycle.CheckpointImage("bench"+strconv.Itoa(mb), "sandbox"),
			Labels: map[string]string{compute.LabelRecord: id}})
		d := time.Since(t0)
		if err != nil {
			fail(err)
		}
		_ = committer.RemoveImage(ctx, img.ID)
		fmt.Printf("%-28s %8.1f ms   image %8.1f MB   (writable layer %d MB)\n", fmt.Sprintf("fork checkpoint %d MB", mb), ms(d), float64(img.SizeBytes)/1e6, mb)
		b.cleanup()
	}

	b.createRunning()
	parent := b.ids[0]
	one := timed(func() { b.fork(parent, 1) })
	cold := timed(func() { b.createRunning() })
	fmt.Printf("%-28s fork %8.1f ms   cold create %8.1f ms   ratio %.2f×\n", "one fork → running", ms(one), ms(cold), float64(one)/float64(cold))
	many := timed(func() { b.fork(parent, *forkCount) })
	creates := timed(func() { parallel(*forkCount, func(int) { b.createRunning() }) })
	fmt.Printf("%-28s fork %8.1f ms   creates %8.1f ms   ratio %.2f× (goal ≤ 1.0×)\n", fmt.Sprintf("fork count=%d → running", *forkCount),
		ms(many), ms(creates), float64(many)/float64(creates))
	b.cleanup()

	envParent := b.createEnv() // builds web-login's images: every later create finds them cached
	// Both sides start with the network pool full, as a backend's does
	// between bursts.
	waitNetPool(ctx, dep, *forkEnvs)
	forked := timed(func() {
		code, body := b.do("POST", benchEnvs+"/"+envParent+"/fork", map[string]any{"count": *forkEnvs})
		var out []struct {
			Environment *struct{ ID string } `json:"environment"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &out) != nil {
			fail(fmt.Errorf("environment fork: %d %s", code, body))
		}
		parallel(len(out), func(i int) {
			if out[i].Environment == nil {
				fail(fmt.Errorf("an environment fork failed: %s", body))
			}
			b.waitEnvReady(out[i].Environment.ID)
		})
	})
	waitNetPool(ctx, dep, *forkEnvs)
	fresh := timed(func() { parallel(*forkEnvs, func(int) { b.createEnv() }) })
	fmt.Printf("%-28s fork %8.1f ms   creates %8.1f ms   ratio %.2f× (goal ≤ 0.5×; web-login, build cached)\n",
		fmt.Sprintf("env fork count=%d → ready", *forkEnvs), ms(forked), ms(fresh), float64(forked)/float64(fresh))
}

// fork forks parent count times and waits until every fork runs.
func (b *backend) fork(parent string, count int) {
	code, body := b.do("POST", "/sandboxes/"+parent+"/fork", map[string]any{"count": count, "waitReady": true, "timeout": 600})
	var out []struct {
		Sandbox *struct{ SandboxID, State string } `json:"sandbox"`
	}
	if code != http.StatusCreated || json.Unmarshal(body, &out) != nil {
		fail(fmt.Errorf("fork: %d %s", code, body))
	}
	for _, f := range out {
		if f.Sandbox == nil || f.Sandbox.State != string(sbx.StateRunning) {
			fail(fmt.Errorf("a fork did not run: %s", body))
		}
		b.mu.Lock()
		b.ids = append(b.ids, f.Sandbox.SandboxID)
		b.mu.Unlock()
	}
}

// createEnv creates a web-login environment and waits until it is ready.
func (b *backend) createEnv() string {
	code, body := b.do("POST", benchEnvs, map[string]any{"task_ref": "web-login", "timeout_sec": 1800})
	var env struct{ ID string }
	if code != http.StatusCreated || json.Unmarshal(body, &env) != nil {
		fail(fmt.Errorf("environment create: %d %s", code, body))
	}
	b.waitEnvReady(env.ID)
	return env.ID
}

func (b *backend) waitEnvReady(id string) {
	deadline := time.Now().Add(15 * time.Minute)
	for time.Now().Before(deadline) {
		code, body := b.do("GET", benchEnvs+"/"+id+"/status?wait=10", nil)
		var st struct {
			State taskenv.State
			Error any
		}
		_ = json.Unmarshal(body, &st)
		switch {
		case code != http.StatusOK:
			fail(fmt.Errorf("environment status: %d %s", code, body))
		case st.State == taskenv.StateReady:
			return
		case st.State == taskenv.StateFailed || st.State == taskenv.StateTornDown:
			fail(fmt.Errorf("environment %s is %s: %v", id, st.State, st.Error))
		}
	}
	fail(fmt.Errorf("environment %s was not ready within 15 minutes", id))
}

// waitNetPool waits (up to 5 minutes) until deployment dep has n pooled
// networks no container uses (docker's group_netpool.go).
func waitNetPool(ctx context.Context, dep string, n int) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		nets, err := engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
			filters.Arg("label", compute.LabelDeployment+"="+dep), filters.Arg("label", "dev.dreadnode.netpool"))})
		if err != nil {
			fail(err)
		}
		free := 0
		for _, net := range nets {
			if full, err := engine.NetworkInspect(ctx, net.ID, network.InspectOptions{}); err == nil && len(full.Containers) == 0 {
				free++
			}
		}
		if free >= n {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Println("bench: the task network pool did not fill within 5 minutes; measuring anyway")
}

// removeCheckpoints removes the checkpoint images of deployment dep.
func removeCheckpoints(ctx context.Context, dep string) {
	imgs, err := engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", compute.LabelDeployment+"="+dep),
		filters.Arg("label", lifecycle.LabelCheckpoint))})
	if err != nil {
		return
	}
	for _, img := range imgs {
		_, _ = engine.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	}
}
