package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A snapshot's commit can outlast the client's per-attempt timeout: its
// POST is bounded by the caller's context only, keeps the key and the
// User-Agent, and is not repeated after a server error (a second
// snapshot). Another call answering as late fails at the attempt timeout,
// so the test sees the limit it lifts.
func TestCreateSnapshotOutlastsAttemptTimeout(t *testing.T) {
	const attempt = 200 * time.Millisecond
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "k-123" || r.Header.Get("User-Agent") != "dn/test" {
			writeJSON(w, http.StatusUnauthorized, envelope(401, "no key", "unauthorized"))
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/sandboxes/broken/snapshots" {
			posts.Add(1)
			writeJSON(w, http.StatusServiceUnavailable, envelope(503, "engine down", "unavailable"))
			return
		}
		// The answer comes after three attempt timeouts (a slow commit).
		select {
		case <-time.After(3 * attempt):
		case <-r.Context().Done():
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"snapshotID": "snap:default", "templateID": "t1", "buildID": "b1",
			"names": []string{"snap"}, "tag": "default", "sizeBytes": 42, "parent": "base", "sourceSandboxID": "sb1",
			"createdAt": "2030-01-02T15:04:05Z"})
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, APIKey: "k-123", UserAgent: "dn/test", Timeout: attempt, RetryMax: 2,
		RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sn, err := c.CreateSnapshot(ctx, "sb1", SnapshotCreate{Name: "snap"})
	if err != nil {
		t.Fatalf("CreateSnapshot past the attempt timeout: %v", err)
	}
	if sn.TemplateID != "t1" || sn.SizeBytes != 42 || sn.SourceSandboxID != "sb1" {
		t.Fatalf("snapshot decoded as %+v", sn)
	}
	if _, err := c.GetVolume(ctx, "v1"); err == nil {
		t.Fatal("GetVolume answered after three attempt timeouts; want the attempt timeout")
	}
	if _, err := c.CreateSnapshot(ctx, "broken", SnapshotCreate{}); StatusOf(err) != http.StatusServiceUnavailable || posts.Load() != 1 {
		t.Fatalf("CreateSnapshot after a 503: %v, %d POSTs; want the 503 and one POST", err, posts.Load())
	}
}

// GetSnapshot answers 404 for a snapshot the list does not show.
func TestGetSnapshotNotListedIsNotFound(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/snapshots" || r.URL.Query().Get("name") != "gone:v1" {
			writeJSON(w, http.StatusBadRequest, envelope(400, "unexpected "+r.URL.String(), "invalid"))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": []any{}})
	}))
	_, err := c.GetSnapshot(context.Background(), "gone:v1")
	if !IsNotFound(err) {
		t.Fatalf("GetSnapshot of a snapshot not listed: %v, want a 404", err)
	}
}
