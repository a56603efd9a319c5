package docker

import (
	"bytes"
	"io"
	"strconv"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// PIDScript reports the command's pid (in the sandbox's namespace, as ps
// shows it) on stderr before it becomes the command (run it as sh -c PIDScript sh
// CMD...); PIDGate strips the line.
const PIDScript = `printf 'DNPID %d\n' "$$" >&2 && exec "$@"`

// PIDGate (used by the services of groups, group_exec.go; Docker sandboxes
// stream through their agent, which reports the pid itself) turns a streamed command's output into events: the start event
// (with the pid from PIDScript's line) first, then stdout and stderr, then
// the exit. Its writers must be called from one goroutine (as stdcopy does).
// The pid line comes from the sandbox's own /bin/sh, which may be replaced:
// at most 64 bytes of stderr and compute.MaxPendingBytes of stdout wait for it, then
// the stream starts without a pid (0) and the output flows on.
type PIDGate struct {
	emit    compute.Emit
	started bool
	head    []byte                 // stderr until pidScript's line is complete
	pending []compute.ProcessEvent // stdout that raced ahead of the start
	held    int                    // bytes in pending
}

func (g *PIDGate) start(pid int) error {
	g.started = true
	if err := g.emit(compute.ProcessEvent{Type: compute.EventStart, PID: pid}); err != nil {
		return err
	}
	for _, ev := range g.pending {
		if err := g.emit(ev); err != nil {
			return err
		}
	}
	g.pending = nil
	return nil
}

func (g *PIDGate) stderr(b []byte) error {
	if g.started {
		return g.emit(compute.ProcessEvent{Type: compute.EventStderr, Data: bytes.Clone(b)})
	}
	g.head = append(g.head, b...)
	i := bytes.IndexByte(g.head, '\n')
	if i < 0 && len(g.head) < 64 {
		return nil
	}
	rest, pid := g.head, 0
	if line, ok := bytes.CutPrefix(g.head[:max(i, 0)], []byte("DNPID ")); ok && i >= 0 {
		pid, _ = strconv.Atoi(string(line))
		rest = g.head[i+1:]
	}
	g.head = nil
	if err := g.start(pid); err != nil {
		return err
	}
	if len(rest) > 0 {
		return g.emit(compute.ProcessEvent{Type: compute.EventStderr, Data: rest})
	}
	return nil
}

func (g *PIDGate) stdout(b []byte) error {
	ev := compute.ProcessEvent{Type: compute.EventStdout, Data: bytes.Clone(b)}
	if !g.started {
		g.pending = append(g.pending, ev)
		if g.held += len(b); g.held < compute.MaxPendingBytes {
			return nil
		}
		return g.startWithoutPID() // no pid line in time: stop holding output
	}
	return g.emit(ev)
}

// NewPIDGate returns a gate emitting to emit.
func NewPIDGate(emit compute.Emit) *PIDGate { return &PIDGate{emit: emit} }

// Stdout and Stderr are the command's output streams.
func (g *PIDGate) Stdout() io.Writer { return writerFunc(g.stdout) }
func (g *PIDGate) Stderr() io.Writer { return writerFunc(g.stderr) }

// Exit emits the exit event (after a start event, whatever the command printed).
func (g *PIDGate) Exit(code int) error {
	if !g.started {
		if err := g.startWithoutPID(); err != nil {
			return err
		}
	}
	return g.emit(compute.ProcessEvent{Type: compute.EventExit, ExitCode: code})
}

// startWithoutPID starts the stream with pid 0 and passes on the stderr
// held while waiting for a pid line that did not come.
func (g *PIDGate) startWithoutPID() error {
	if err := g.start(0); err != nil {
		return err
	}
	head := g.head
	g.head = nil
	if len(head) > 0 {
		return g.emit(compute.ProcessEvent{Type: compute.EventStderr, Data: head})
	}
	return nil
}

type writerFunc func([]byte) error

func (f writerFunc) Write(b []byte) (int, error) {
	if err := f(b); err != nil {
		return 0, err
	}
	return len(b), nil
}
