package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/docker/docker/client"
)

// /readyz (without failing) and the start-up log say how sandboxes' disk
// use is limited, naming the engine's storage driver; where the driver
// cannot cap writable layers (fuse-overlayfs here) they say so, what
// enforces the limit instead, and what to do for ENOSPC.
func TestReadyzAndLogSayHowDiskIsLimited(t *testing.T) {
	ta := newTestApp(t, func(c *Config) { c.DockerDiskLimitMB = 10240 }) // the default of DOCKER_DISK_LIMIT_MB
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	info, err := cli.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := ta.req("GET", "/readyz", nil)
	var body struct {
		Details map[string]string `json:"details"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || r.code != 200 {
		t.Fatalf("/readyz: %d %s %v", r.code, r.body, err)
	}
	var logged bytes.Buffer
	logDiskLimit(context.Background(), slog.New(slog.NewTextHandler(&logged, nil)), ta.app.Provider)
	want := []string{"storage driver " + info.Driver, "10240 MB", "DOCKER_DISK_LIMIT_MB"}
	if info.Driver == "fuse-overlayfs" {
		want = append(want, "cannot cap", "stops any sandbox", "xfs mounted with pquota")
		if !strings.Contains(logged.String(), "level=WARN") {
			t.Errorf("the start-up line is not a warning: %s", logged.String())
		}
	}
	for _, w := range want {
		if !strings.Contains(body.Details["disk"], w) {
			t.Errorf("/readyz details.disk %q does not say %q", body.Details["disk"], w)
		}
		if !strings.Contains(logged.String(), w) {
			t.Errorf("the start-up log %q does not say %q", logged.String(), w)
		}
	}
}
