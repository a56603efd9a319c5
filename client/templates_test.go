package client

import (
	"testing"
	"time"
)

// A build's log is the build's containers' output: printing it cannot move
// the cursor, recolour the terminal or forge a line.
func TestLogLineIsInert(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := LogLine(TemplateBuildLogEntry{Timestamp: at, Level: "info", Step: "1", Message: "ok\x1b[2J\x1b]0;pwned\x07\rnext\n2026-01-02T03:04:05Z INFO fake\n"})
	want := `2026-01-02T03:04:05Z INFO [1] ok\x1b[2J\x1b]0;pwned\x07\x0dnext\n2026-01-02T03:04:05Z INFO fake`
	if got != want {
		t.Fatalf("LogLine:\n got %s\nwant %s", got, want)
	}
	if SafeText("a\tb\nc\u009b") != "a\tb\nc\\x9b" {
		t.Fatalf("SafeText: %q", SafeText("a\tb\nc\u009b"))
	}
}
