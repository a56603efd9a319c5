package tasks

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// An environment's footprint for admission is all its services together:
// their own limits (an input may set one), else the default service limits
// (1 CPU, 512 MB), rounded up to whole CPUs and MB; a second create of the
// same task and inputs is served from memory, other inputs are not.
func TestFootprint(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "sized")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, text := range map[string]string{
		"task.yaml": "name: sized\nversion: 1.0.0\ndescription: sized\ninstruction: none\nexecute_service: a\n" +
			"inputs:\n  mem:\n    default: 100m\n    description: memory of b\n",
		"compose.yaml": "services:\n  a:\n    image: dreadnode/base:latest\n    cpus: 0.5\n" +
			"  b:\n    image: dreadnode/base:latest\n    mem_limit: ${mem}\n  c:\n    image: dreadnode/base:latest\n",
	} {
		if err := os.WriteFile(filepath.Join(d, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := catalog.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := cat.Exact("dreadnode", "sized", "1.0.0")
	if task == nil {
		t.Fatal("the catalog has no sized task")
	}
	s := &Service{}
	for _, tc := range []struct {
		input       string
		cpus, memMB int
	}{
		// a: 0.5 CPU, 512 MB; b: 1 CPU, 100 MB; c: 1 CPU, 512 MB.
		{"100m", 3, 1124},
		{"100m", 3, 1124}, // from memory
		{"1g", 3, 2048},
	} {
		res, err := task.ResolveInputs(map[string]string{"mem": tc.input})
		if err != nil {
			t.Fatal(err)
		}
		cpus, mem, err := s.footprint(context.Background(), task, res)
		if err != nil || cpus != tc.cpus || mem != tc.memMB {
			t.Fatalf("mem %s: %d CPUs, %d MB, %v; want %d, %d", tc.input, cpus, mem, err, tc.cpus, tc.memMB)
		}
	}
	if n := len(s.sizes.m); n != 2 {
		t.Fatalf("%d footprints remembered, want 2 (one per inputs)", n)
	}
}
