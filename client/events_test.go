package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// StreamEvents parses Server-Sent Events, sends Last-Event-ID and the
// filters, and reports the last event it handed over.
func TestStreamEvents(t *testing.T) {
	var gotLast, gotType, gotSandbox string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotLast, gotType, gotSandbox = r.Header.Get("Last-Event-ID"), r.URL.Query().Get("type"), r.URL.Query().Get("sandboxId")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": keep-alive\n\n")
		for _, id := range []string{"e1", "e2"} {
			fmt.Fprintf(w, "id: %s\nevent: sandbox.lifecycle.killed\ndata: {\"id\":%q,\"type\":\"sandbox.lifecycle.killed\",\"sandboxId\":\"sb\",\"cause\":\"ttl\"}\n\n", id, id)
		}
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL, RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	var seen []Event
	last, err := c.StreamEvents(context.Background(), "e0", []string{"sandbox.lifecycle.killed"}, "sb", func(e Event) error { seen = append(seen, e); return nil })
	if err != nil || last != "e2" || len(seen) != 2 || seen[0].Id != "e1" || seen[1].Cause != "ttl" {
		t.Fatalf("last %q err %v seen %+v", last, err, seen)
	}
	if gotLast != "e0" || gotType != "sandbox.lifecycle.killed" || gotSandbox != "sb" {
		t.Fatalf("request: Last-Event-ID %q type %q sandboxId %q", gotLast, gotType, gotSandbox)
	}
}
