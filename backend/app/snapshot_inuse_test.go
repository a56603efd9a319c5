package app

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Deleting a snapshot while a sandbox started from it still has its
// container answers 204 and removes the records, but the engine refuses
// to remove an image a container uses: the image stays until that sandbox
// is deleted, and the orphan image sweep (no build record names it) then
// removes it. The delete path does not retry: it leaves the image to the
// sweep, which retries every period. Here the sweep's grace and period are
// short; in production an in-use snapshot's image goes within a minute
// (ImageSweepEvery) of its last sandbox's end, and not before 10 minutes
// (ImageGrace) after it was made.
func TestDeletedSnapshotImageGoesWithItsLastSandbox(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) {
		c.ImageGrace, c.ImageSweepEvery = time.Second, 200*time.Millisecond
	})
	src, _ := ta.create(map[string]any{"waitReady": true, "timeout": 300})
	images := func() []string {
		out, err := exec.Command("docker", "images", "-q", "dreadnode-snapshot/"+src).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))
	}
	t.Cleanup(func() {
		for _, img := range images() {
			_ = exec.Command("docker", "rmi", "-f", img).Run()
		}
	})
	r := ta.req("POST", "/sandboxes/"+src+"/snapshots", map[string]any{"name": "inuse"})
	if r.code != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", r.code, r.body)
	}
	tid, _ := r.json(t)["templateID"].(string)
	if n := len(images()); n != 1 {
		t.Fatalf("%d snapshot images after the snapshot, want 1", n)
	}
	user, _ := ta.create(map[string]any{"templateID": "inuse", "waitReady": true, "timeout": 300})
	if r := ta.req("DELETE", "/sandboxes/"+src, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete the source sandbox: %d %s", r.code, r.body)
	}

	if r := ta.req("DELETE", "/templates/"+tid, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete the snapshot: %d %s", r.code, r.body)
	}
	if r := ta.req("GET", "/templates/"+tid, nil); r.code != http.StatusNotFound {
		t.Fatalf("the deleted snapshot still reads: %d %s", r.code, r.body)
	}
	// The sandbox running from it keeps its image: give the sweep several
	// periods past its grace to (wrongly) take it.
	hold := time.Now().Add(3 * time.Second)
	for time.Now().Before(hold) {
		if n := len(images()); n != 1 {
			t.Fatalf("the image of a sandbox still running was removed (%d images)", n)
		}
		time.Sleep(200 * time.Millisecond) // observing over the sweep's periods
	}
	if r := ta.req("DELETE", "/sandboxes/"+user, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete the sandbox started from the snapshot: %d %s", r.code, r.body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(images()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted snapshot's image is still there 60s after its last sandbox was deleted: %v", images())
		}
		time.Sleep(200 * time.Millisecond) // poll interval, bounded by the deadline
	}
}
