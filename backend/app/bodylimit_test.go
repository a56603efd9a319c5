package app

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// Request bodies beyond DREADNODE_MAX_BODY_BYTES get 413 naming the
// limit: at once when Content-Length announces it, and when a body sent
// without one (chunked) grows past it while read. (Seen failing without
// the bound: the 2 KiB upload was accepted.)
func TestBodyOverTheLimitIs413(t *testing.T) {
	ta := newReplica(t, filepath.Join(t.TempDir(), "db"), e2bfake.New(t), true, func(c *Config) { c.MaxBodyBytes = 1024 })
	id, tok := ta.create(map[string]any{"waitReady": true})
	path := "/sandboxes/" + id + "/files?path=/tmp/upload"
	put := func(body io.Reader) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, ta.srv.URL+path, body)
		req.Header.Set("X-API-Key", ta.key)
		req.Header.Set("X-Access-Token", tok)
		req.Header.Set("Content-Type", "application/octet-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := put(bytes.NewReader(make([]byte, 512))); code >= 300 {
		t.Fatalf("a 512-byte upload: %d %s", code, body)
	}
	if code, body := put(bytes.NewReader(make([]byte, 2048))); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "DREADNODE_MAX_BODY_BYTES") {
		t.Fatalf("a 2 KiB upload with Content-Length: %d %s, want 413 naming the limit", code, body)
	}
	chunked := io.MultiReader(strings.NewReader(strings.Repeat("x", 2048))) // no length: sent chunked
	if code, body := put(chunked); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 2 KiB chunked upload: %d %s, want 413", code, body)
	}
}
