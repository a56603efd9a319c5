package main_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

// sandboxCreated reads the id out of `dn sandbox create --json`.
func sandboxCreated(t *testing.T, r result) string {
	t.Helper()
	var sb struct {
		SandboxID string `json:"sandboxID"`
		State     string `json:"state"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || sb.SandboxID == "" || sb.State != "running" {
		t.Fatalf("sandbox create --wait --json: %v %s", err, r)
	}
	return sb.SandboxID
}

// poll runs f until it returns nil or the deadline passes.
func poll(t *testing.T, limit time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	wait := 100 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(wait) // polling interval, bounded by the deadline
		wait = min(2*wait, 2*time.Second)
	}
}

// dn volume create|list|delete and dn sandbox create --volume against a
// real backend: a sandbox writes into a volume, a second sandbox reads it,
// deleting the mounted volume is refused naming the sandboxes and what to
// do, and once they are gone the volume and its Docker volume are deleted.
func TestDNVolumes(t *testing.T) {
	b := backendproc.Start(t, backendproc.Options{})
	d := newDN(t, map[string]string{"DREADNODE_API_URL": b.URL, "DREADNODE_API_KEY": b.APIKey, "DREADNODE_ORG": b.Org})
	var sandboxes []string
	t.Cleanup(func() {
		for _, id := range sandboxes {
			deleteVia(t, b, "/sandboxes/"+id)
		}
	})

	r := d.run("volume", "create", "bad name")
	expect(t, r, 1, r.stderr, "HTTP 400", "name")
	r = d.must("volume", "create", "shared-data")
	expect(t, r, 0, r.stdout, "Volume:", "Name:    shared-data")
	r = d.run("volume", "create", "shared-data")
	expect(t, r, 1, r.stderr, "HTTP 409")
	r = d.must("volume", "ls", "--json")
	var vols []struct {
		VolumeID string `json:"volumeID"`
		Name     string `json:"name"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &vols); err != nil || len(vols) != 1 || vols[0].Name != "shared-data" {
		t.Fatalf("volume ls --json: %v %s", err, r)
	}
	vid := vols[0].VolumeID
	if out, err := exec.Command("docker", "volume", "inspect", "dnvol-"+vid).CombinedOutput(); err != nil {
		t.Fatalf("Docker volume of %s: %v %s", vid, err, out)
	}

	writer := sandboxCreated(t, d.must("sandbox", "create", "--wait", "--json", "--volume", "shared-data:/data"))
	sandboxes = append(sandboxes, writer)
	d.must("sandbox", "exec", writer, "--", "sh", "-c", "echo kept > /data/f")
	reader := sandboxCreated(t, d.must("sandbox", "create", "--wait", "--json", "--volume", "shared-data:/data:ro"))
	sandboxes = append(sandboxes, reader)
	r = d.must("sandbox", "exec", reader, "--", "cat", "/data/f")
	if r.stdout != "kept\n" {
		t.Fatalf("the second sandbox reads %q from the volume: %s", r.stdout, r)
	}
	r = d.run("sandbox", "exec", reader, "--", "sh", "-c", "echo no > /data/g")
	if r.code == 0 {
		t.Fatalf("a read-only mount was written: %s", r)
	}

	r = d.run("volume", "rm", "shared-data")
	expect(t, r, 1, r.stderr, "HTTP 409", writer, reader, "Delete the sandboxes that mount it")
	d.must("sandbox", "delete", writer)
	d.must("sandbox", "delete", reader)
	// A sandbox being removed still holds the volume for a moment (409).
	poll(t, time.Minute, func() error {
		if r := d.run("volume", "rm", "shared-data"); r.code != 0 {
			return fmt.Errorf("volume rm after the sandboxes' delete: %s", r)
		}
		return nil
	})
	r = d.must("volume", "list")
	if strings.Contains(r.stdout, "shared-data") {
		t.Fatalf("volume list after rm: %s", r)
	}
	if out, err := exec.Command("docker", "volume", "inspect", "dnvol-"+vid).CombinedOutput(); err == nil {
		t.Fatalf("Docker volume dnvol-%s is left after rm: %s", vid, out)
	}
	r = d.run("volume", "rm", vid)
	expect(t, r, 1, r.stderr, "HTTP 404")
	r = d.run("sandbox", "create", "--volume", "nocolon")
	expect(t, r, 2, r.stderr, "NAME:/path")
}

// dn sandbox snapshot and dn snapshot list|delete against a real backend:
// a snapshot keeps the sandbox's files, a sandbox started from it by name
// finds them, the parent keeps running, and a deleted snapshot leaves no
// image.
func TestDNSnapshots(t *testing.T) {
	b := backendproc.Start(t, backendproc.Options{})
	d := newDN(t, map[string]string{"DREADNODE_API_URL": b.URL, "DREADNODE_API_KEY": b.APIKey, "DREADNODE_ORG": b.Org})
	var sandboxes []string
	t.Cleanup(func() {
		for _, id := range sandboxes {
			deleteVia(t, b, "/sandboxes/"+id)
		}
	})

	parent := sandboxCreated(t, d.must("sandbox", "create", "--wait", "--json"))
	sandboxes = append(sandboxes, parent)
	d.must("sandbox", "exec", parent, "--", "sh", "-c", "echo from-the-parent > /marker")

	r := d.must("sandbox", "snapshot", parent, "--name", "prepared:v1")
	expect(t, r, 0, r.stdout, "Snapshot: prepared:v1", "Parent:   base", "Sandbox:  "+parent, "dn sandbox create --template prepared:v1")
	r = d.must("snapshot", "ls", "--json")
	var snaps []struct {
		SnapshotID      string `json:"snapshotID"`
		TemplateID      string `json:"templateID"`
		BuildID         string `json:"buildID"`
		SizeBytes       int64  `json:"sizeBytes"`
		SourceSandboxID string `json:"sourceSandboxID"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &snaps); err != nil || len(snaps) != 1 {
		t.Fatalf("snapshot ls --json: %v %s", err, r)
	}
	sn := snaps[0]
	if sn.SnapshotID != "prepared:v1" || sn.SizeBytes <= 0 || sn.SourceSandboxID != parent {
		t.Fatalf("snapshot listed as %+v", sn)
	}
	r = d.must("snapshot", "list", "--sandbox", parent)
	expect(t, r, 0, r.stdout, "prepared:v1", sn.TemplateID)

	child := sandboxCreated(t, d.must("sandbox", "create", "--wait", "--json", "--template", "prepared:v1"))
	sandboxes = append(sandboxes, child)
	r = d.must("sandbox", "exec", child, "--", "cat", "/marker")
	if r.stdout != "from-the-parent\n" {
		t.Fatalf("the sandbox started from the snapshot reads %q: %s", r.stdout, r)
	}
	r = d.must("sandbox", "get", parent)
	expect(t, r, 0, r.stdout, "running")

	r = d.run("sandbox", "snapshot", "nosuchsandbox")
	expect(t, r, 1, r.stderr, "HTTP 404")
	r = d.run("sandbox", "snapshot", parent, "--name", "Bad Name")
	expect(t, r, 1, r.stderr, "HTTP 400", "name")
	r = d.run("snapshot", "rm", "base")
	expect(t, r, 1, r.stderr, "HTTP 404")

	// The sandbox started from the snapshot goes first: the backend keeps
	// the image of a snapshot deleted while a container uses it.
	d.must("sandbox", "delete", child)
	poll(t, time.Minute, func() error {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.dreadnode.record="+child).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			return fmt.Errorf("containers of sandbox %s after delete: %v %s", child, err, out)
		}
		return nil
	})
	r = d.must("snapshot", "rm", "prepared")
	expect(t, r, 0, r.stdout, "deleted snapshot prepared:v1", sn.TemplateID)
	r = d.must("snapshot", "ls")
	if strings.Contains(r.stdout, "prepared") {
		t.Fatalf("snapshot ls after rm: %s", r)
	}
	poll(t, 30*time.Second, func() error {
		out, err := exec.Command("docker", "image", "ls", "-q", "--filter", "label=dev.dreadnode.build="+sn.BuildID).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			return fmt.Errorf("images of snapshot build %s after rm: %v %s", sn.BuildID, err, out)
		}
		return nil
	})
}
