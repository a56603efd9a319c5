package reconciler

import (
	"errors"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Diagnostics speak of the sandbox, never of the engine host's paths.
func TestDiagnosticHidesHostPaths(t *testing.T) {
	cause := errors.New(`error mounting "/var/lib/docker/volumes/dn-x-v/_data" to rootfs at "/proc": create mountpoint for /proc mount: /run/containerd/io.containerd.runtime.v2.task/moby/abc/rootfs/proc: not a directory`)
	got := Diagnostic(compute.Errorf(compute.KindEntrypoint, "create", cause, "the main process could not start: %v", cause))
	if strings.Contains(got, "/var/lib/docker") || strings.Contains(got, "/run/containerd") {
		t.Fatalf("diagnostic shows host paths: %s", got)
	}
	if !strings.HasPrefix(got, "entrypoint error: ") || !strings.Contains(got, `rootfs at "/proc"`) {
		t.Fatalf("diagnostic lost what the user needs: %s", got)
	}
}
