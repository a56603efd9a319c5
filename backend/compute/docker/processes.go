package docker

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// sandboxPy is run inside the sandbox with python3 for background
// processes and the filesystem operations the engine's API lacks: the
// processes' state and output live in the sandbox (so every backend replica
// can read them, also after a restart, and they die with it). Templates need
// python3 (3.9 or later) on PATH for these routes; exec and file
// read/write/archive need nothing.
//
//go:embed sandbox.py
var sandboxPy string

// helper runs one sandbox.py command. Its exit codes map to provider kinds.
func (p *Provider) helper(ctx context.Context, op, id string, args []string, env map[string]string, stdin io.Reader, stdout io.Writer) error {
	stderr := compute.CappedBuffer{Max: compute.MaxErrorBytes}
	if stdout == nil {
		stdout = io.Discard
	}
	code, err := p.attach(ctx, id, streamExec{cmd: append([]string{"python3", "-c", sandboxPy}, args...), env: envList(env),
		user: "0", stdin: stdin, stdout: stdout, stderr: &stderr})
	if err != nil {
		return classify(op, err)
	}
	msg := strings.TrimSpace(stderr.String())
	switch code {
	case 0:
		return nil
	case 4:
		return compute.Errorf(compute.KindNotFound, op, nil, "%s", msg)
	case 5:
		return compute.Errorf(compute.KindConflict, op, nil, "%s", msg)
	case 6:
		return compute.Errorf(compute.KindInvalid, op, nil, "%s", msg)
	case 126, 127:
		return compute.Errorf(compute.KindInvalid, op, nil, "this sandbox's template has no python3, which processes and file listing need: %s", msg)
	}
	return compute.Errorf(compute.KindInternal, op, nil, "the sandbox helper failed (exit %d): %s", code, lastLine(msg))
}

// lastLine is the last line of a helper's stderr: a Python traceback's
// exception, without the frames before it (they say nothing to the user).
func lastLine(msg string) string {
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		return strings.TrimSpace(msg[i+1:])
	}
	return msg
}

func envList(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	return env(m)
}

// StartProcess implements compute.Processes.
func (p *Provider) StartProcess(ctx context.Context, ref compute.Ref, req compute.ProcessRequest) (compute.Process, error) {
	const op = "start process"
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.Process{}, compute.Errorf(compute.KindInvalid, op, nil, "cmd must not be empty")
	}
	spec, _ := json.Marshal(map[string]any{"cmd": req.Cmd, "cwd": req.Cwd, "tag": req.Tag, "stdin": req.Stdin})
	out := newAnswer(op)
	if err := p.helper(ctx, op, ref.ID, []string{"start", string(spec)}, req.Env, nil, out); err != nil {
		return compute.Process{}, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		return compute.Process{}, compute.Errorf(compute.KindInternal, op, nil, "the sandbox helper answered %q instead of a pid", head(out.Bytes()))
	}
	return compute.Process{PID: pid, Tag: req.Tag, Cmd: req.Cmd, Running: true, StartedAt: time.Now().UTC().Truncate(time.Second)}, nil
}

// ListProcesses implements compute.Processes.
func (p *Provider) ListProcesses(ctx context.Context, ref compute.Ref) ([]compute.Process, error) {
	const op = "list processes"
	out := newAnswer(op)
	if err := p.helper(ctx, op, ref.ID, []string{"list"}, nil, nil, out); err != nil {
		return nil, err
	}
	var ps []compute.Process
	if err := json.Unmarshal(out.Bytes(), &ps); err != nil {
		return nil, compute.Errorf(compute.KindInternal, op, err, "the sandbox helper's process list is not JSON: %v", err)
	}
	return ps, nil
}

// ProcessOutput implements compute.Processes: the helper copies the
// process's framed output log, then follows it.
func (p *Provider) ProcessOutput(ctx context.Context, ref compute.Ref, pid int, follow bool, emit compute.Emit) error {
	const op = "process output"
	f := "0"
	if follow {
		f = "1"
	}
	return p.helper(ctx, op, ref.ID, []string{"output", strconv.Itoa(pid), f}, nil, nil, &frameWriter{pid: pid, emit: emit})
}

// frameWriter parses the helper's frames (type byte, uint32 length, data)
// into events. Type 0 starts the stream, type 3 is the exit code (int32).
// The frames come from a file inside the sandbox, which anything there can
// rewrite: a length over compute.MaxFrameBytes, or one that does not fit
// its type, ends the stream instead of being allocated.
type frameWriter struct {
	pid  int
	buf  []byte
	emit compute.Emit
}

func (w *frameWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for len(w.buf) >= 5 {
		typ, n := w.buf[0], int64(binary.BigEndian.Uint32(w.buf[1:5]))
		if err := checkFrame(typ, n); err != nil {
			return 0, err
		}
		if int64(len(w.buf)) < 5+n {
			break
		}
		data := w.buf[5 : 5+n]
		var ev compute.ProcessEvent
		switch typ {
		case 0:
			ev = compute.ProcessEvent{Type: compute.EventStart, PID: w.pid}
		case 1:
			ev = compute.ProcessEvent{Type: compute.EventStdout, Data: bytes.Clone(data)}
		case 2:
			ev = compute.ProcessEvent{Type: compute.EventStderr, Data: bytes.Clone(data)}
		case 3:
			ev = compute.ProcessEvent{Type: compute.EventExit, ExitCode: int(int32(binary.BigEndian.Uint32(data)))}
		}
		if err := w.emit(ev); err != nil {
			return 0, err
		}
		w.buf = w.buf[5+n:]
	}
	if len(w.buf) == 0 {
		w.buf = w.buf[:0:0] // drop a large backing array
	}
	return len(b), nil
}

// checkFrame refuses a frame header the helper cannot have written.
func checkFrame(typ byte, n int64) error {
	const op = "process output"
	tampered := "its output file in the sandbox was tampered with"
	switch {
	case typ > 3:
		return compute.Errorf(compute.KindInternal, op, nil, "the sandbox sent an unknown frame type %d: %s", typ, tampered)
	case n > compute.MaxFrameBytes:
		return compute.Errorf(compute.KindInternal, op, nil, "the sandbox sent a frame of %d bytes, over the %d-byte bound: %s", n, compute.MaxFrameBytes, tampered)
	case typ == 0 && n != 0, typ == 3 && n != 4:
		return compute.Errorf(compute.KindInternal, op, nil, "the sandbox sent %s frame of %d bytes: %s", map[byte]string{0: "a start", 3: "an exit"}[typ], n, tampered)
	}
	return nil
}

// WriteStdin implements compute.Processes.
func (p *Provider) WriteStdin(ctx context.Context, ref compute.Ref, pid int, data io.Reader, eof bool) error {
	e := "0"
	if eof {
		e = "1"
	}
	if data == nil {
		data = bytes.NewReader(nil)
	}
	return p.helper(ctx, "write stdin", ref.ID, []string{"stdin", strconv.Itoa(pid), e}, nil, data, nil)
}

// SignalProcess implements compute.Processes.
func (p *Provider) SignalProcess(ctx context.Context, ref compute.Ref, pid int, sig string) error {
	switch sig {
	case "SIGTERM", "SIGKILL", "SIGINT", "SIGHUP":
	default:
		return compute.Errorf(compute.KindInvalid, "signal", nil, "signal must be SIGTERM, SIGKILL, SIGINT or SIGHUP, got %q", sig)
	}
	return p.helper(ctx, "signal", ref.ID, []string{"signal", strconv.Itoa(pid), sig}, nil, nil, nil)
}
