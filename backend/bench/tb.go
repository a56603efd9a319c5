package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// benchTB lets the bench reuse the test harnesses (backendproc, replicas,
// e2bfake), which take a testing.TB, outside `go test`. The embedded nil
// TB is never called: the harnesses use only the methods below. Fatal
// runs the cleanups and exits, as a failed bench part should.
type benchTB struct {
	testing.TB
	name     string
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	close    func() // runs the cleanups, last registered first, as testing does; also run by fail
}

func newBenchTB(name string) *benchTB {
	b := &benchTB{name: name}
	b.close = atExit(b.runCleanups)
	return b
}

func (b *benchTB) Helper()      {}
func (b *benchTB) Name() string { return b.name }
func (b *benchTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s: %s\n", b.name, fmt.Sprintf(format, args...))
}
func (b *benchTB) Log(args ...any) { b.Logf("%s", fmt.Sprint(args...)) }
func (b *benchTB) Errorf(format string, args ...any) {
	b.mu.Lock()
	b.failed = true
	b.mu.Unlock()
	b.Logf(format, args...)
}
func (b *benchTB) Error(args ...any) { b.Errorf("%s", fmt.Sprint(args...)) }
func (b *benchTB) Fatalf(format string, args ...any) {
	b.Errorf(format, args...)
	fail(fmt.Errorf("part %s failed", b.name))
}
func (b *benchTB) Fatal(args ...any) { b.Fatalf("%s", fmt.Sprint(args...)) }
func (b *benchTB) Failed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}
func (b *benchTB) Context() context.Context { return context.Background() }
func (b *benchTB) Cleanup(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cleanups = append(b.cleanups, f)
}
func (b *benchTB) TempDir() string {
	dir, err := os.MkdirTemp("", "dreadnode-bench-")
	if err != nil {
		b.Fatalf("temp dir: %v", err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (b *benchTB) runCleanups() {
	for {
		b.mu.Lock()
		n := len(b.cleanups)
		if n == 0 {
			b.mu.Unlock()
			return
		}
		f := b.cleanups[n-1]
		b.cleanups = b.cleanups[:n-1]
		b.mu.Unlock()
		f()
	}
}
