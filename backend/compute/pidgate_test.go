package compute

import (
	"fmt"
	"testing"
)

func TestPIDGate(t *testing.T) {
	var got []string
	g := NewPIDGate(func(ev ProcessEvent) error {
		got = append(got, fmt.Sprintf("%s:%d:%s", ev.Type, ev.PID+ev.ExitCode, ev.Data))
		return nil
	})
	// stdout racing ahead of the pid line waits for the start event; the
	// pid line arrives split and glued to the command's own stderr.
	_, _ = g.Stdout().Write([]byte("out1"))
	_, _ = g.Stderr().Write([]byte("DNPID 4"))
	_, _ = g.Stderr().Write([]byte("2\nerr1"))
	_, _ = g.Stdout().Write([]byte("out2"))
	_ = g.Exit(3)
	want := []string{"start:42:", "stdout:0:out1", "stderr:0:err1", "stdout:0:out2", "exit:3:"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	// Without a pid line (no sh): start 0, the stderr kept as it was.
	got = nil
	g = NewPIDGate(func(ev ProcessEvent) error {
		got = append(got, fmt.Sprintf("%s:%d:%s", ev.Type, ev.PID+ev.ExitCode, ev.Data))
		return nil
	})
	_, _ = g.Stderr().Write([]byte("sh: not found"))
	_ = g.Exit(127)
	if want := []string{"start:0:", "stderr:0:sh: not found", "exit:127:"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
