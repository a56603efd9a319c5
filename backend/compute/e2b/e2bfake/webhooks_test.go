package e2bfake_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// The fake's webhook API takes E2B's documented body only, and its
// deliveries carry E2B's headers and a signature an independent
// implementation of E2B's scheme verifies.
func TestFakeWebhooks(t *testing.T) {
	fake := e2bfake.New(t)
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer recv.Close()
	call := func(method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, fake.URL+path, strings.NewReader(body))
		req.Header.Set("X-API-Key", fake.APIKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := call("POST", "/events/webhooks", `{"url":"`+recv.URL+`","secret":"x"}`); code != http.StatusBadRequest {
		t.Fatalf("a misspelt field: %d, want 400", code)
	}
	if v := fake.TakeViolations(); len(v) != 1 || !strings.Contains(v[0], "secret") {
		t.Fatalf("violations after a misspelt field: %v", v)
	}
	secret := "0123456789abcdef-secret"
	if code := call("POST", "/events/webhooks", `{"name":"t","url":"`+recv.URL+`","enabled":true,"events":["sandbox.lifecycle.killed"],"signatureSecret":"`+secret+`"}`); code != http.StatusCreated {
		t.Fatalf("register: %d", code)
	}
	id := fake.AddSandbox(e2bfake.SandboxSpec{Metadata: map[string]string{"k": "v"}})
	fake.Pause(id) // not subscribed: nothing sent
	fake.Kill(id)
	var r *http.Request
	select {
	case r = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery within 5s")
	}
	body := <-bodies
	sum := sha256.Sum256(append([]byte(secret), body...))
	if want := strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "="); r.Header.Get("e2b-signature") != want {
		t.Fatalf("e2b-signature %q, want %q", r.Header.Get("e2b-signature"), want)
	}
	if r.Header.Get("e2b-signature-version") != "v1" || r.Header.Get("e2b-delivery-id") == "" || !strings.HasPrefix(r.Header.Get("e2b-webhook-id"), "wh_") {
		t.Fatalf("headers: %v", r.Header)
	}
	var ev struct {
		Type, SandboxID string
		EventData       struct {
			SandboxMetadata map[string]string `json:"sandbox_metadata"`
		} `json:"eventData"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&ev); err != nil || ev.Type != "sandbox.lifecycle.killed" || ev.SandboxID != id || ev.EventData.SandboxMetadata["k"] != "v" {
		t.Fatalf("payload %s: %v", body, err)
	}
	if code := call("DELETE", "/events/webhooks/nope", ""); code != http.StatusNotFound {
		t.Fatalf("deleting an unknown webhook: %d", code)
	}
	select {
	case <-got:
		t.Fatal("the paused event was delivered to a webhook subscribed to killed only")
	default:
	}
}
