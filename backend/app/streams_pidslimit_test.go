package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// A sandbox at its pids limit (fork fails with EAGAIN) answers a start on
// the process routes with a 409 that says so, not a 400 blaming the
// command nor a 502; once there is room again, processes start. The limit
// is lowered to what the container runs now with the engine's update API
// (as a fork bomb or 4,000 zombies would leave it).
func TestStreamProcessLimit(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	do := ta.sandboxDo(t, "/sandboxes/"+id, tok)
	do("POST", "/processes", map[string]any{"cmd": []string{"sleep", "600"}}, http.StatusCreated)

	cs := ta.containersOf(id)
	if len(cs) != 1 {
		t.Fatalf("want one container for %s, got %d", id, len(cs))
	}
	cli := dockertest.Client(t)
	ctx := context.Background()
	setPids := func(n int64) {
		t.Helper()
		if _, err := cli.ContainerUpdate(ctx, cs[0].ID, container.UpdateConfig{Resources: container.Resources{PidsLimit: &n}}); err != nil {
			t.Fatalf("setting the pids limit to %d: %v", n, err)
		}
	}
	st, err := cli.ContainerStatsOneShot(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var stats container.StatsResponse
	err = json.NewDecoder(st.Body).Decode(&stats)
	st.Body.Close()
	if err != nil || stats.PidsStats.Current == 0 {
		t.Fatalf("reading the container's pids: %v (stats %+v)", err, stats.PidsStats)
	}
	setPids(int64(stats.PidsStats.Current))

	// An E2B client (envd's Connect API through the host router) reads
	// resource_exhausted, the code envd's clients retry on.
	hc := hostClient(ta, nil)
	hc.Transport = tokenTransport{base: hc.Transport, token: &tok}
	pc := processconnect.NewProcessClient(hc, "http://49983-"+id+".localhost")
	ps, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "echo", Args: []string{"hi"}}}))
	if err == nil {
		for ps.Receive() {
		}
		err = ps.Err()
		_ = ps.Close()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "process limit") {
		t.Errorf("envd Start at the pids limit: %v, want resource_exhausted saying the sandbox hit its process limit", err)
	}
	for _, route := range []string{"/processes", "/exec"} {
		r := ta.req("POST", "/sandboxes/"+id+route, map[string]any{"cmd": []string{"echo", "hi"}}, "X-Access-Token", tok)
		if r.code != http.StatusConflict || !strings.Contains(string(r.body), "process limit") {
			t.Errorf("POST %s at the pids limit: %d %s, want 409 saying the sandbox hit its process limit", route, r.code, r.body)
		}
	}

	setPids(4096)
	r := do("POST", "/exec", map[string]any{"cmd": []string{"echo", "hi"}}, http.StatusOK)
	if m := r.json(t); m["stdout"] != "hi\n" {
		t.Fatalf("exec once there is room again: %s", r.body)
	}
}
