package agent

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// junk is what TestQuietAgentReturnsFreedMemory allocates (a global, so it
// is kept until dropped).
var junk [][]byte

// Once quiet, the agent hands what it freed back to the kernel: memory
// left from a busy moment does not stay resident while the sandbox is at
// rest. Not parallel: it measures the process's heap.
func TestQuietAgentReturnsFreedMemory(t *testing.T) {
	a := startAgent(t)
	held := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapSys - m.HeapReleased
	}
	for range 64 {
		junk = append(junk, make([]byte, 1<<20))
	}
	if h := held(); h < 64<<20 {
		t.Fatalf("holding %d MiB after allocating 64", h>>20)
	}
	junk = nil // garbage now, but nothing collects it while nothing allocates
	res, err := a.hc.Get(a.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("/health answered %s", res.Status)
	}
	eventually(t, 10*time.Second, func() error {
		if h := held(); h > 32<<20 {
			return fmt.Errorf("the heap still holds %d MiB from the kernel, want under 32", h>>20)
		}
		return nil
	})
}
