package app

import (
	"os"
	"strings"
	"testing"
)

// The dev key is shown once, by the start that made it, on a terminal;
// it is kept with mode 0600 and never printed again (standard output is
// often a log). (Seen failing with the old banner: every start printed
// the key.)
func TestDevKeyShownOnceOnATerminal(t *testing.T) {
	dir := t.TempDir()
	key, created, err := devKey(dir)
	if err != nil || !created || !strings.HasPrefix(key, "dn_dev_") {
		t.Fatalf("first devKey: %q %v %v", key, created, err)
	}
	fi, err := os.Stat(devKeyPath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("dev key file: %v, mode %v", err, fi.Mode().Perm())
	}
	banner := func(created, terminal bool) string {
		var b strings.Builder
		(&App{Config: Config{DataDir: dir}, DevKey: key, devKeyNew: created}).banner(&b, "http://127.0.0.1:1", terminal)
		return b.String()
	}
	if out := banner(true, true); !strings.Contains(out, key) || !strings.Contains(out, "listening on http://127.0.0.1:1") {
		t.Fatalf("the start that made the key, on a terminal:\n%s", out)
	}
	if out := banner(true, false); strings.Contains(out, key) || !strings.Contains(out, devKeyPath(dir)) {
		t.Fatalf("the start that made the key, output not a terminal, shows the key or not its file:\n%s", out)
	}

	if err := os.Chmod(devKeyPath(dir), 0o644); err != nil {
		t.Fatal(err)
	}
	again, created, err := devKey(dir)
	if err != nil || created || again != key {
		t.Fatalf("second devKey: %q %v %v, want the same key, not created", again, created, err)
	}
	if fi, _ := os.Stat(devKeyPath(dir)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("a dev key file made readable is left %v, want 0600", fi.Mode().Perm())
	}
	if out := banner(false, true); strings.Contains(out, key) || !strings.Contains(out, devKeyPath(dir)) {
		t.Fatalf("a later start shows the key or not its file:\n%s", out)
	}
}
