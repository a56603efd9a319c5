package docker

import (
	"fmt"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

func TestPIDGate(t *testing.T) {
	var got []string
	g := NewPIDGate(func(ev compute.ProcessEvent) error {
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
	g = NewPIDGate(func(ev compute.ProcessEvent) error {
		got = append(got, fmt.Sprintf("%s:%d:%s", ev.Type, ev.PID+ev.ExitCode, ev.Data))
		return nil
	})
	_, _ = g.Stderr().Write([]byte("sh: not found"))
	_ = g.Exit(127)
	if want := []string{"start:0:", "stderr:0:sh: not found", "exit:127:"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// A /bin/sh that never writes the pid line holds at most compute.MaxPendingBytes of
// stdout: then the stream starts with pid 0 and the output flows on.
func TestPIDGateBoundsWhatWaitsForThePID(t *testing.T) {
	var events []compute.ProcessEvent
	g := NewPIDGate(func(ev compute.ProcessEvent) error { events = append(events, ev); return nil })
	chunk := make([]byte, 32<<10)
	for range 4 << 20 / len(chunk) {
		_, _ = g.Stdout().Write(chunk)
		if g.held > compute.MaxPendingBytes {
			t.Fatalf("%d bytes of stdout held waiting for the pid line", g.held)
		}
	}
	_, _ = g.Stderr().Write([]byte("DNPID 42\n"))
	_ = g.Exit(0)
	n := 0
	for _, ev := range events[1 : len(events)-1] {
		n += len(ev.Data)
	}
	if events[0].Type != compute.EventStart || events[0].PID != 0 || events[len(events)-1].Type != compute.EventExit || n != 4<<20+len("DNPID 42\n") {
		t.Fatalf("first %+v, last %+v, %d bytes of output", events[0], events[len(events)-1], n)
	}
	if len(g.pending) != 0 {
		t.Fatalf("%d events still pending", len(g.pending))
	}
}
