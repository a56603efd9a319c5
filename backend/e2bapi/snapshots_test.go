package e2bapi_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// A snapshot of a running sandbox is a template of its org: a sandbox
// starts from it (by id or name) with the files written before it; another
// org cannot use it; deleting it removes it from the list.
func TestE2BSnapshotTemplates(t *testing.T) {
	e := newEdge(t)
	sb := e.create(map[string]any{"templateID": "base", "timeout": 300})
	t.Cleanup(func() { e.env.Req("DELETE", "/e2b/sandboxes/"+sb.SandboxID, nil) })
	if r := e.env.Req("POST", "/e2b/sandboxes/"+sb.SandboxID+"/snapshots", map[string]any{"name": "snap-" + sb.SandboxID + ":v1"}); r.Code != 201 {
		t.Fatalf("snapshot: %s", r)
	} else {
		var info struct {
			SnapshotID string   `json:"snapshotID"`
			Names      []string `json:"names"`
		}
		_ = json.Unmarshal(r.Body, &info)
		if !strings.HasSuffix(info.SnapshotID, ":v1") || len(info.Names) != 1 || strings.Contains(info.Names[0], ":") {
			t.Fatalf("snapshot answer: %s", r.Body)
		}
		t.Cleanup(func() { e.env.Req("DELETE", "/e2b/templates/"+info.SnapshotID, nil) })
		// Its org starts a sandbox from it; the sandbox names the template.
		child := e.create(map[string]any{"templateID": info.Names[0] + ":v1", "timeout": 300})
		t.Cleanup(func() { e.env.Req("DELETE", "/e2b/sandboxes/"+child.SandboxID, nil) })
		e.detailOf(child.SandboxID)
	}
}

// snapshotImages lists the local images of sandbox id's snapshots.
func snapshotImages(t *testing.T, id string) []string {
	t.Helper()
	out, err := exec.Command("docker", "images", "-q", "dreadnode-snapshot/"+id).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// Another org's snapshot is an unknown template to it (it cannot start
// from, list, tag nor delete it), and a sandbox killed while its snapshot
// is taken leaves no image (the kill may land before, during or after the
// commit; whichever, no image outlives a snapshot that did not answer 201).
func TestE2BSnapshotOtherOrgAndKill(t *testing.T) {
	e := newEdge(t)
	other := e.env.AddOrg("org2", 1_000_000_000)
	sb := e.create(map[string]any{"templateID": "base", "timeout": 300})
	r := e.env.Req("POST", "/e2b/sandboxes/"+sb.SandboxID+"/snapshots", map[string]any{"name": "mine"})
	if r.Code != 201 {
		t.Fatalf("snapshot: %s", r)
	}
	t.Cleanup(func() { e.env.Req("DELETE", "/e2b/templates/mine", nil) })
	// E2B's answer for a template not found, word for word: nothing
	// tells the other org that this one has a template of that name.
	r = e.env.ReqKey(other, "POST", "/e2b/sandboxes", map[string]any{"templateID": "mine", "timeout": 300})
	e.e2bError("another org's snapshot", 404, r.Body, "template 'mine' not found")
	var got struct{ Message string }
	_ = json.Unmarshal(r.Body, &got)
	if got.Message != "template 'mine' not found" {
		t.Fatalf("another org's snapshot: want E2B's not-found message alone, got %s", r)
	}
	for _, req := range [][2]string{{"GET", "/e2b/templates/mine/tags"}, {"DELETE", "/e2b/templates/mine"}} {
		if r := e.env.ReqKey(other, req[0], req[1], nil); r.Code != 404 {
			t.Fatalf("another org: %s %s: %s", req[0], req[1], r)
		}
	}
	if r := e.env.ReqKey(other, "GET", "/e2b/snapshots", nil); r.Code != 200 || strings.Contains(string(r.Body), "mine") {
		t.Fatalf("another org lists the snapshot: %s", r)
	}

	// Kill during the snapshot: either the snapshot finished first (201,
	// its image kept) or it answers 404 and no image is left.
	victim := e.create(map[string]any{"templateID": "base", "timeout": 300})
	done := make(chan int, 1)
	go func() {
		done <- e.env.Req("POST", "/e2b/sandboxes/"+victim.SandboxID+"/snapshots", map[string]any{}).Code
	}()
	if r := e.env.Req("DELETE", "/e2b/sandboxes/"+victim.SandboxID, nil); r.Code != 204 {
		t.Fatalf("kill: %s", r)
	}
	code := <-done
	imgs := snapshotImages(t, victim.SandboxID)
	switch code {
	case 201:
		if len(imgs) != 1 {
			t.Fatalf("a snapshot that finished has %d images", len(imgs))
		}
		_ = exec.Command("docker", "rmi", "-f", imgs[0]).Run()
	case 404:
		if len(imgs) != 0 {
			t.Fatalf("a snapshot of a killed sandbox left images %v", imgs)
		}
	default:
		t.Fatalf("snapshot during a kill answered %d", code)
	}
}

// A sandbox killed while its snapshot is being taken leaves no image,
// whether the kill lands as the commit starts (running alongside it; the
// commit may fail on a container being removed) or once the commit made
// its image (before the snapshot is recorded): the snapshot answers 404, no
// image of it exists, none is listed, and the sandbox's container goes.
// Without the check after the commit (and its removal of the image), the
// second case answers 201 with an image of a killed sandbox.
func TestE2BSnapshotKilledMidCommit(t *testing.T) {
	e := newEdge(t)
	for _, afterCommit := range []bool{false, true} {
		t.Run(fmt.Sprintf("afterCommit=%v", afterCommit), func(t *testing.T) {
			victim := e.create(map[string]any{"templateID": "base", "timeout": 300})
			var once sync.Once
			e.env.App.Templates.SetDuringCommit(func(rec *store.Record, done bool) {
				if rec.ID != victim.SandboxID || done != afterCommit {
					return
				}
				once.Do(func() {
					if r := e.env.Req("DELETE", "/e2b/sandboxes/"+rec.ID, nil); r.Code != 204 {
						t.Errorf("kill during the snapshot: %s", r)
					}
				})
			})
			r := e.env.Req("POST", "/e2b/sandboxes/"+victim.SandboxID+"/snapshots", map[string]any{"name": "killed-" + victim.SandboxID})
			if r.Code != 404 {
				t.Errorf("snapshot of a sandbox killed during it: %s (want 404)", r)
			}
			if imgs := snapshotImages(t, victim.SandboxID); len(imgs) != 0 {
				_ = exec.Command("docker", append([]string{"rmi", "-f"}, imgs...)...).Run()
				t.Fatalf("the snapshot of a killed sandbox left images %v", imgs)
			}
			if r := e.env.Req("GET", "/e2b/snapshots?sandboxID="+victim.SandboxID, nil); r.Code != 200 || strings.TrimSpace(string(r.Body)) != "[]" {
				t.Fatalf("snapshots of the killed sandbox: %s", r)
			}
			poll.Until(t, time.Minute, 100*time.Millisecond, func() error {
				if cs := dockertest.ContainersOfRecord(t, victim.SandboxID); len(cs) != 0 {
					return fmt.Errorf("%d containers of the killed sandbox left", len(cs))
				}
				return nil
			})
		})
	}
}
