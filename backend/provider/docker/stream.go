package docker

import (
	"bytes"
	"context"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/provider"
)

// streamExec is one docker exec whose stdin, stdout and stderr are streams.
type streamExec struct {
	cmd    []string
	env    []string
	cwd    string
	user   string
	stdin  io.Reader // nil: no stdin
	stdout io.Writer
	stderr io.Writer
}

// attach runs e until it exits or ctx ends. Whenever it returns before the
// command finished (ctx done, a writer failed) the command and its
// descendants are killed (see execMarkerEnv), so nothing outlives its caller.
func (p *Provider) attach(ctx context.Context, id string, e streamExec) (exitCode int, err error) {
	const op = "exec"
	marker := randomHex(12)
	opts := container.ExecOptions{Cmd: e.cmd, Env: append(e.env, execMarkerEnv+"="+marker), WorkingDir: e.cwd, User: e.user,
		AttachStdin: e.stdin != nil, AttachStdout: true, AttachStderr: true}
	created, err := p.cli.ContainerExecCreate(ctx, id, opts)
	if err != nil {
		return 0, classify(op, err)
	}
	hj, err := p.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, classify(op, err)
	}
	defer hj.Close()
	finished := false
	defer func() {
		if !finished {
			p.killExec(id, marker)
		}
	}()
	// Closing the connection unblocks the copies below when ctx ends.
	defer context.AfterFunc(ctx, func() { hj.Close() })()
	if e.stdin != nil {
		go func() {
			// Ends when stdin ends or the connection is closed (by the
			// deferred Close at the latest).
			_, _ = io.Copy(hj.Conn, e.stdin)
			_ = hj.CloseWrite()
		}()
	}
	if _, err := stdcopy.StdCopy(e.stdout, e.stderr, hj.Reader); err != nil {
		if ctx.Err() != nil {
			return 0, classify(op, ctx.Err())
		}
		return 0, err
	}
	// The stream ends when the process closed its output, which is usually
	// but not always its exit: poll the exit code until ctx is done.
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		ins, err := p.cli.ContainerExecInspect(ctx, created.ID)
		if err != nil {
			return 0, classify(op, err)
		}
		if !ins.Running {
			finished = true
			return ins.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, classify(op, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// pidScript reports the command's pid (in the sandbox's namespace, as ps
// shows it) on stderr before it becomes the command; startGate strips it.
const pidScript = `printf 'DNPID %d\n' "$$" >&2 && exec "$@"`

// startGate turns an ExecStream's output into events: the start event (with
// the pid from pidScript's line) first, then stdout and stderr. Both writers
// are called from one goroutine (stdcopy), so it needs no lock.
type startGate struct {
	emit    provider.Emit
	started bool
	head    []byte                  // stderr until pidScript's line is complete
	pending []provider.ProcessEvent // stdout that raced ahead of the start
}

func (g *startGate) start(pid int) error {
	g.started = true
	if err := g.emit(provider.ProcessEvent{Type: provider.EventStart, PID: pid}); err != nil {
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

func (g *startGate) stderr(b []byte) error {
	if g.started {
		return g.emit(provider.ProcessEvent{Type: provider.EventStderr, Data: bytes.Clone(b)})
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
		return g.emit(provider.ProcessEvent{Type: provider.EventStderr, Data: rest})
	}
	return nil
}

func (g *startGate) stdout(b []byte) error {
	ev := provider.ProcessEvent{Type: provider.EventStdout, Data: bytes.Clone(b)}
	if !g.started {
		g.pending = append(g.pending, ev)
		return nil
	}
	return g.emit(ev)
}

type writerFunc func([]byte) error

func (f writerFunc) Write(b []byte) (int, error) {
	if err := f(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// ExecStream implements provider.Processes. The command runs under /bin/sh
// (for its pid), which every template must have.
func (p *Provider) ExecStream(ctx context.Context, ref provider.Ref, req provider.ExecRequest, stdin io.Reader, emit provider.Emit) error {
	const op = "exec"
	if len(req.Cmd) == 0 {
		return provider.Errorf(provider.KindInvalid, op, nil, "cmd must not be empty")
	}
	if req.Cwd != "" && !path.IsAbs(req.Cwd) {
		return provider.Errorf(provider.KindInvalid, op, nil, "cwd must be an absolute path, got %q", req.Cwd)
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	g := &startGate{emit: emit}
	code, err := p.attach(runCtx, ref.ID, streamExec{cmd: append([]string{"/bin/sh", "-c", pidScript, "sh"}, req.Cmd...),
		env: env(req.Env), cwd: req.Cwd, stdin: stdin, stdout: writerFunc(g.stdout), stderr: writerFunc(g.stderr)})
	if err != nil {
		if runCtx.Err() != nil && ctx.Err() == nil {
			return provider.Errorf(provider.KindTimeout, op, err, "the command did not finish within %s and was killed", req.Timeout)
		}
		return err
	}
	if !g.started {
		if err := g.start(0); err != nil {
			return err
		}
		if len(g.head) > 0 {
			if err := emit(provider.ProcessEvent{Type: provider.EventStderr, Data: g.head}); err != nil {
				return err
			}
		}
	}
	return emit(provider.ProcessEvent{Type: provider.EventExit, ExitCode: code})
}
