package agent

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestTemplateStart: the start command runs in its own directory and
// environment and the wait ends once the ready command succeeds; a start
// command that exits non-zero first, or a ready command that never
// succeeds within the limit, is the error, naming the code or the limit.
func TestTemplateStart(t *testing.T) {
	r := sharedReaper()
	dir := t.TempDir()
	env := os.Environ()
	ok := `{"cmd":"sleep 1; echo \"$MARK $(pwd)\" > ` + dir + `/up; exec sleep 5","readyCmd":"test -s ` + dir + `/up","dir":"` + dir + `","env":["MARK=set"]}`
	if err := runTemplateStart(r, env, ok, 20*time.Second); err != nil {
		t.Fatalf("a start command that comes up: %v", err)
	}
	if b, _ := os.ReadFile(dir + "/up"); strings.TrimSpace(string(b)) != "set "+dir {
		t.Fatalf("the start command ran with %q, want its env and dir (%q)", b, "set "+dir)
	}
	err := runTemplateStart(r, env, `{"cmd":"exit 5","readyCmd":"false"}`, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited with code 5") {
		t.Fatalf("a start command exiting 5: %v", err)
	}
	err = runTemplateStart(r, env, `{"cmd":"exec sleep 5","readyCmd":"false"}`, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "did not succeed within 2s") {
		t.Fatalf("a ready command that never succeeds: %v", err)
	}
	if err := runTemplateStart(r, env, `not json`, time.Second); err == nil || !strings.Contains(err.Error(), EnvStart) {
		t.Fatalf("a malformed start command: %v", err)
	}
}

// TestDefaultWorkdirStandsForNoPath: with a template's WORKDIR, a request
// naming no path (a process's cwd, a file or directory path) means it, as
// envd's default workdir; relative and absolute paths are unchanged.
// (Not parallel: it sets the agent's global.)
func TestDefaultWorkdirStandsForNoPath(t *testing.T) {
	old := defaultWorkdir
	t.Cleanup(func() { defaultWorkdir = old })
	id := identity{name: "user", home: "/home/user"}
	defaultWorkdir = ""
	if got := id.resolve(""); got != "/home/user" {
		t.Fatalf("no workdir: %q", got)
	}
	defaultWorkdir = "/app"
	for in, want := range map[string]string{"": "/app", "x": "/home/user/x", "/abs": "/abs", "~/y": "/home/user/y"} {
		if got := id.resolve(in); got != want {
			t.Errorf("resolve(%q) = %q, want %q", in, got, want)
		}
	}
}
