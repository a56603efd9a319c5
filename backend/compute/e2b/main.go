package e2b

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// An E2B sandbox does not end when the process it was created to run (a
// Spec's Command, e.g. a Worlds job) ends: E2B has no main process, so its
// API keeps answering "running". The provider that started the command
// follows its envd stream to the end event and from then on reports the
// instance exited with the command's exit code (Get, List and an event on
// Watch), so the reconciler ends the record as it does on Docker. The
// command's output is kept (its last mainTailBytes) for Logs, as Docker's
// container log keeps the main process's.
//
// What is followed lives in this process: a backend restarted while a
// command runs no longer sees it end, and the record ends at its timeout.

// mainTailBytes bounds the output of a main command kept for Logs.
const mainTailBytes = 256 << 10

type mains struct {
	mu     sync.Mutex
	by     map[string]*mainRun // sandbox id
	events chan compute.Event
}

type mainRun struct {
	stop  context.CancelFunc // ends the following
	ended bool
	code  int
	out   []byte // the last mainTailBytes of stdout and stderr, as received
}

func newMains() *mains {
	return &mains{by: map[string]*mainRun{}, events: make(chan compute.Event, 64)}
}

// follow reads stream (a main command's, past its start event) in the
// background until its end event, then marks the sandbox's main ended and
// sends an event. A stream that breaks first (envd unreachable, the
// sandbox paused or removed) says nothing of the command: the sandbox is
// then no longer followed.
func (m *mains) follow(ref compute.Ref, recordID string, stream *connect.ServerStreamForClient[process.StartResponse], stop context.CancelFunc) {
	run := &mainRun{stop: stop}
	m.mu.Lock()
	if old := m.by[ref.ID]; old != nil {
		old.stop()
	}
	m.by[ref.ID] = run
	m.mu.Unlock()
	go func() {
		defer stop()
		defer stream.Close()
		for stream.Receive() {
			ev := stream.Msg().GetEvent()
			if d := ev.GetData(); d != nil {
				m.keep(run, d.GetStdout())
				m.keep(run, d.GetStderr())
			}
			if end := ev.GetEnd(); end != nil {
				m.mu.Lock()
				run.ended, run.code = true, envd.ExitCode(end)
				m.mu.Unlock()
				select {
				case m.events <- compute.Event{RecordID: recordID, Ref: compute.Ref{ID: ref.ID}, Status: compute.StatusExited}:
				default: // the reconciler is behind: its next observation finds the end
				}
				return
			}
		}
		m.mu.Lock()
		if m.by[ref.ID] == run {
			delete(m.by, ref.ID)
		}
		m.mu.Unlock()
	}()
}

func (m *mains) keep(run *mainRun, b []byte) {
	if len(b) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	run.out = append(run.out, b...)
	if over := len(run.out) - mainTailBytes; over > 0 {
		run.out = append(run.out[:0], run.out[over:]...)
	}
}

// apply marks inst exited when its main command ended.
func (m *mains) apply(inst *compute.Instance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if run := m.by[inst.Ref.ID]; run != nil && run.ended && inst.Status == compute.StatusRunning {
		inst.Status, inst.ExitCode = compute.StatusExited, run.code
	}
}

// output is the kept output of the sandbox's main command, one line each.
func (m *mains) output(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	run := m.by[id]
	if run == nil || len(run.out) == 0 {
		return ""
	}
	s := string(bytes.ToValidUTF8(run.out, []byte("\uFFFD")))
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// forget stops following the sandbox (it is being removed).
func (m *mains) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if run := m.by[id]; run != nil {
		run.stop()
		delete(m.by, id)
	}
}
