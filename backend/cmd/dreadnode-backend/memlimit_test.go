package main

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// memoryAvailable is what this process may use, read here without the
// library: cgroup v2's memory.max, else v1's memory.limit_in_bytes (when
// below the host's), else the host's MemTotal.
func memoryAvailable(t *testing.T) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var host uint64
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			host = kb << 10
		}
	}
	if host == 0 {
		t.Fatal("no MemTotal in /proc/meminfo")
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && v < host {
				return v
			}
			return host
		}
	}
	return host
}

// keepLimit restores Go's memory limit at cleanup.
func keepLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	debug.SetMemoryLimit(math.MaxInt64)
}

// With neither GOMEMLIMIT nor AUTOMEMLIMIT, the soft limit is 90% of the
// container's memory limit (cgroup v1 or v2) or of the host's memory, and
// the start-up log says so.
func TestMemoryLimitFollowsTheContainerOrHost(t *testing.T) {
	keepLimit(t)
	t.Setenv("GOMEMLIMIT", "")
	_ = os.Unsetenv("GOMEMLIMIT")
	t.Setenv("AUTOMEMLIMIT", "")
	_ = os.Unsetenv("AUTOMEMLIMIT")
	var logs bytes.Buffer
	setMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)))
	want := int64(float64(memoryAvailable(t)) * memoryShare)
	got := debug.SetMemoryLimit(-1)
	if diff := got - want; diff < -(1<<20) || diff > 1<<20 {
		t.Fatalf("memory limit %d, want 90%% of %d = %d", got, memoryAvailable(t), want)
	}
	if !strings.Contains(logs.String(), "msg=\"memory limit\" GOMEMLIMIT="+strconv.FormatInt(got, 10)) {
		t.Errorf("log %q does not state the limit", logs.String())
	}
}

// GOMEMLIMIT (Go's own) wins, and AUTOMEMLIMIT=off sets none.
func TestMemoryLimitLeftToTheOperator(t *testing.T) {
	for _, env := range [][2]string{{"GOMEMLIMIT", "300MiB"}, {"AUTOMEMLIMIT", "off"}} {
		keepLimit(t)
		t.Setenv(env[0], env[1])
		setMemoryLimit(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("%s=%s: the binary set a limit of %d", env[0], env[1], got)
		}
		_ = os.Unsetenv(env[0])
	}
}
