package agent

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// startEnded starts cmd with no owner attached and waits for its end.
func startEnded(t *testing.T, ps *Processes, cmd string, args ...string) *proc {
	t.Helper()
	p, err := ps.start(startSpec{config: &process.ProcessConfig{Cmd: cmd, Args: args}, user: requestUser(http.Header{})})
	if err != nil {
		t.Fatal(err)
	}
	p.out.release()
	eventually(t, 30*time.Second, func() error {
		if _, done := p.end(); !done {
			return errNotFound
		}
		return nil
	})
	return p
}

// The ended processes' output together stays within EndedOutputBytes:
// the oldest lose theirs first (staying listed with their exit), the
// newest keep all of it. Not parallel: it measures the process's heap.
func TestEndedOutputIsBoundedInTotal(t *testing.T) {
	ps := newProcesses(sharedReaper(), nil)
	const n = 80 // 80 MiB of output kept without the bound
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var procs []*proc
	for range n {
		procs = append(procs, startEnded(t, ps, "head", "-c", "1048576", "/dev/zero"))
	}
	total := 0
	for _, p := range ps.list(true) {
		total += p.out.size()
	}
	if total > EndedOutputBytes || total != ps.endedBytes {
		t.Fatalf("ended processes keep %d bytes of output (accounted %d), want at most %d", total, ps.endedBytes, EndedOutputBytes)
	}
	if len(ps.list(true)) != n {
		t.Fatalf("%d processes listed, want all %d (only their output is dropped)", len(ps.list(true)), n)
	}
	if got := procs[n-1].out.size(); got != 1<<20 {
		t.Fatalf("the newest ended process keeps %d bytes, want its whole MiB", got)
	}
	if got := procs[0].out.size(); got != 0 {
		t.Fatalf("the oldest ended process keeps %d bytes, want its output dropped", got)
	}
	if chunks, ended, _ := procs[0].out.since(0); len(chunks) != 0 || !ended {
		t.Fatalf("a replay of the oldest gives %d chunks, ended %v; want none, ended", len(chunks), ended)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > EndedOutputBytes+8<<20 {
		t.Fatalf("the heap grew %d MiB for %d MiB of output, want at most the %d MiB bound and some", grew>>20, n, EndedOutputBytes>>20)
	}
	runtime.KeepAlive(procs)
}

// A short output keeps a slice its size, not a read buffer per read.
// Not parallel: it measures the process's heap.
func TestShortOutputKeepsItsSize(t *testing.T) {
	ps := newProcesses(sharedReaper(), nil)
	const n = 200
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var procs []*proc
	for range n {
		procs = append(procs, startEnded(t, ps, "echo", "hello"))
	}
	for _, p := range procs {
		if chunks, _, _ := p.out.since(0); len(chunks) != 1 || string(chunks[0].data) != "hello\n" || cap(chunks[0].data) > 64 {
			t.Fatalf("echo's output kept as %d chunks (first %q, capacity %d), want one of its 6 bytes", len(chunks), chunks[0].data, cap(chunks[0].data))
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// 200 × 32 KiB read buffers would be 6.4 MiB.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 2<<20 {
		t.Fatalf("the heap grew %d KiB for %d short outputs, want under 2 MiB", grew>>10, n)
	}
	runtime.KeepAlive(procs)
}
