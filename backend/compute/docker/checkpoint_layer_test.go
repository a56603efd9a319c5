package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// The writable layer read directly (not the engine's commit, which the test
// never reaches): files written, a file deleted (a whiteout) and a directory
// removed and made again (opaque) are in the copy as in its source; a link
// stays a link (never followed); the copy runs the source image's command.
func TestCheckpointReadsTheWritableLayer(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	parent := mustCreate(t, p, testSpec())
	if res := exec(t, p, parent, "sh", "-c", "echo kept > /root/kept && rm /etc/issue && rm -rf /opt && mkdir /opt && echo new > /opt/new && ln -s /etc/shadow /root/link"); res.ExitCode != 0 {
		t.Fatalf("changing the parent: %+v", res)
	}
	img, err := p.loadCheckpoint(ctx, parent.Ref.ID, testImagePrefix+"layer-"+randomHex(4)+":latest", map[string]string{compute.LabelOrg: "org-test"})
	if err != nil {
		t.Fatalf("the writable layer was not read directly: %v", err)
	}
	t.Cleanup(func() { _ = p.RemoveImage(context.Background(), img.ID) })
	if got, err := p.Get(ctx, parent.Ref); err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("parent after the checkpoint: %+v %v", got, err)
	}
	spec := testSpec()
	spec.Image = img.ID
	child := mustCreate(t, p, spec)
	for cmd, want := range map[string]string{
		"cat /root/kept": "kept",
		"test -e /etc/issue && echo there || echo gone": "gone",
		"ls /opt":             "new",
		"readlink /root/link": "/etc/shadow",
	} {
		res := exec(t, p, child, "sh", "-c", cmd)
		if got := strings.TrimSpace(string(res.Stdout)); got != want {
			t.Errorf("%s in the copy: %q, want %q (%s)", cmd, got, want, res.Stderr)
		}
	}
}
