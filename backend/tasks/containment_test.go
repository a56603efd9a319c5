package tasks_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/containment"
)

// wantConfined checks every service of environment id from inside: the
// capability set caps, no_new_privs, and the pids and memory limits its
// cgroup shows (v1 or v2), plus the CPU limit the engine applied.
func (h *harness) wantConfined(id string, want map[string]hardening.Limits, caps []string) {
	h.t.Helper()
	ctx := context.Background()
	cs := h.containers(id)
	if len(cs) != len(want) {
		h.t.Fatalf("environment %s has %d containers, want %d", id, len(cs), len(want))
	}
	for _, c := range cs {
		svc := c.Labels[compute.LabelService]
		status, err := containment.Exec(ctx, h.cli, c.ID, "cat", "/proc/self/status")
		if err != nil {
			h.t.Fatalf("service %s: %v", svc, err)
		}
		if err := containment.CheckStatus(status, caps); err != nil {
			h.t.Errorf("service %s: %v", svc, err)
		}
		pids, mem, err := containment.Limits(ctx, h.cli, c.ID)
		if err != nil {
			h.t.Fatalf("service %s: %v", svc, err)
		}
		l := want[svc]
		if pids != fmt.Sprint(l.Pids) || mem != fmt.Sprint(l.MemoryBytes) {
			h.t.Errorf("service %s: pids.max %s, memory limit %s; want %d and %d", svc, pids, mem, l.Pids, l.MemoryBytes)
		}
		in, err := h.cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			h.t.Fatal(err)
		}
		if in.HostConfig.NanoCPUs != l.NanoCPUs {
			h.t.Errorf("service %s: NanoCPUs %d, want %d", svc, in.HostConfig.NanoCPUs, l.NanoCPUs)
		}
	}
}

func TestTaskServicesConfined(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// The shipped web-login sets no limit: every service gets the defaults.
	web, _ := h.create("acme", "ws", map[string]any{"task_ref": "web-login"})
	// A service with deploy.resources.limits and cap_add NET_RAW.
	scan, token := h.create("acme", "ws", map[string]any{"task_ref": "raw-scanner"})
	h.waitState("acme", "ws", web, readyTimeout, "ready")
	h.waitState("acme", "ws", scan, readyTimeout, "ready")

	d := hardening.DefaultServiceLimits
	h.wantConfined(web, map[string]hardening.Limits{"web": d, "attacker": d}, hardening.Capabilities)
	h.wantConfined(scan, map[string]hardening.Limits{"scanner": {MemoryBytes: 128 << 20, NanoCPUs: 5e8, Pids: 64}},
		append(slices.Clone(hardening.Capabilities), "NET_RAW"))

	// The capability added back works where it was asked for.
	r := h.execute("acme", "ws", scan, token, map[string]any{
		"command": []string{"python3", "-c", "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('raw ok')"}})
	if r.Code != http.StatusOK || !strings.Contains(string(r.Body), "raw ok") {
		t.Fatalf("raw socket with NET_RAW added back: %d %s", r.Code, r.Body)
	}
}

func TestTaskRuntimeTheEngineLacks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do("acme", http.MethodPost, envPath("acme", "ws"), map[string]any{"task_ref": "needs-runtime"})
	if r.Code != http.StatusBadRequest {
		t.Fatalf("create of a task whose runtime the engine lacks: %d %s", r.Code, r.Body)
	}
	for _, want := range []string{"task.yaml", "runtime", `\"dn-no-such-runtime\"`, "available: ", "runc"} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("answer does not say %q: %s", want, r.Body)
		}
	}
	if n := len(h.do("acme", http.MethodGet, envPath("acme", "ws"), nil).JSON(t)["environments"].([]any)); n != 0 {
		t.Errorf("a refused create left %d environments", n)
	}
}
