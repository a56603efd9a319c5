package scaleout_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

// TestTemplateFilesServedByEveryReplica follows E2B's SDK flow across two
// replicas behind one address, as a load balancer spreads it: the files of
// a COPY step are asked for and uploaded through replica 0, then asked for
// again and the build started through replica 1 (which runs the build: a
// build runs on the replica that received its start). Each replica has a
// data directory of its own, as the Compose deployment's containers do.
// Replica 1 must find the files (present: true, no second upload) and
// the build must copy them. Seen failing when uploads were kept on the
// receiving replica's disk: replica 1 answered present: false and the
// build failed with "no files of hash … were uploaded".
func TestTemplateFilesServedByEveryReplica(t *testing.T) {
	s := replicas.Start(t, replicas.Options{N: 2})
	a, b := s.Replicas[0], s.Replicas[1]
	if a.DataDir == b.DataDir {
		t.Fatalf("the replicas share a data directory (%s): the test proves nothing", a.DataDir)
	}

	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	content := "copied across replicas"
	if err := tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte(content))
	_ = tw.Close()
	_ = gz.Close()
	sum := sha256.Sum256(buf.Bytes())
	hash := hex.EncodeToString(sum[:])

	var created struct{ TemplateID, BuildID string }
	if _, err := call(a, 30*time.Second, http.MethodPost, "/e2b/v3/templates", `{"name": "across", "cpuCount": 2, "memoryMB": 1024}`, &created); err != nil {
		t.Fatal(err)
	}
	tid, bid := created.TemplateID, created.BuildID
	t.Cleanup(func() { _, _ = call(a, 60*time.Second, http.MethodDelete, "/e2b/templates/"+tid, "", nil) })

	var st struct {
		Present bool
		URL     *string `json:"url"`
	}
	if _, err := call(a, 30*time.Second, http.MethodGet, "/e2b/templates/"+tid+"/files/"+hash, "", &st); err != nil {
		t.Fatal(err)
	}
	if st.Present || st.URL == nil {
		t.Fatalf("replica 0: want an upload link for new files, got %+v", st)
	}
	link, err := url.Parse(*st.URL)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, a.URL+link.RequestURI(), bytes.NewReader(buf.Bytes()))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("upload to replica 0: %d", res.StatusCode)
	}

	st.Present, st.URL = false, nil
	if _, err := call(b, 30*time.Second, http.MethodGet, "/e2b/templates/"+tid+"/files/"+hash, "", &st); err != nil {
		t.Fatal(err)
	}
	if !st.Present {
		t.Errorf("replica 1 does not see the files uploaded through replica 0 (present: false, link %v): the client would upload them again", st.URL)
	}

	body, _ := json.Marshal(map[string]any{"fromImage": "dreadnode/base:latest", "steps": []map[string]any{
		{"type": "COPY", "args": []string{".", "/app/"}, "filesHash": hash},
		{"type": "RUN", "args": []string{fmt.Sprintf("test \"$(cat /app/hello.txt)\" = '%s'", content)}},
	}})
	if _, err := call(b, 60*time.Second, http.MethodPost, "/e2b/v2/templates/"+tid+"/builds/"+bid, string(body), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var status map[string]any
		if _, err := call(a, 30*time.Second, http.MethodGet, "/e2b/templates/"+tid+"/builds/"+bid+"/status", "", &status); err != nil {
			t.Fatal(err)
		}
		if status["status"] == "ready" {
			break
		}
		if status["status"] == "error" || time.Now().After(deadline) {
			raw, _ := json.Marshal(status)
			t.Fatalf("the build started on replica 1 did not copy the files uploaded through replica 0: %s", raw)
		}
		time.Sleep(500 * time.Millisecond) // polling the build's status, as E2B's SDK does
	}

	// Deleting the template through replica 1 removes the files for
	// every replica: replica 0 asks for them again.
	if _, err := call(b, 60*time.Second, http.MethodDelete, "/e2b/templates/"+tid, "", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err = a.Do(ctx, http.MethodGet, "/e2b/templates/"+tid+"/files/"+hash, nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("files of a deleted template: want 404, got %d", res.StatusCode)
	}
}
