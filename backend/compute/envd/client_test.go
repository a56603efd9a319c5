package envd

import (
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// A daemon in the sandbox (its root can replace envd) that declares a
// message of 1 GiB and sends 64 MiB of it: the client refuses the message
// at its declared length, holding nothing of it, with an error that says
// what happened.
func TestHostileMessageLengthIsRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/connect+proto")
		w.WriteHeader(http.StatusOK)
		var head [5]byte
		binary.BigEndian.PutUint32(head[1:], 1<<30)
		_, _ = w.Write(head[:])
		zeros := make([]byte, 1<<20)
		for range 64 {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), URL: srv.URL, Name: "sandbox test", Agent: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := c.ProcessOutput(ctx, 1, true, func(compute.ProcessEvent) error {
		t.Error("an event came out of a refused message")
		return nil
	})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "bytes one message may hold") {
		t.Fatalf("error %v, want one naming the message bound", err)
	}
	if grew := int64(after.TotalAlloc) - int64(before.TotalAlloc); grew > 16<<20 {
		t.Fatalf("reading the refused message allocated %d MiB", grew>>20)
	}
}
