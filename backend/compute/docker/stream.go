package docker

import (
	"context"
	"io"
	"path"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
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

// ExecStream implements compute.Processes. The command runs under /bin/sh
// (for its pid), which every template must have.
func (p *Provider) ExecStream(ctx context.Context, ref compute.Ref, req compute.ExecRequest, stdin io.Reader, emit compute.Emit) error {
	const op = "exec"
	if len(req.Cmd) == 0 {
		return compute.Errorf(compute.KindInvalid, op, nil, "cmd must not be empty")
	}
	if req.Cwd != "" && !path.IsAbs(req.Cwd) {
		return compute.Errorf(compute.KindInvalid, op, nil, "cwd must be an absolute path, got %q", req.Cwd)
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	g := compute.NewPIDGate(emit)
	code, err := p.attach(runCtx, ref.ID, streamExec{cmd: append([]string{"/bin/sh", "-c", compute.PIDScript, "sh"}, req.Cmd...),
		env: env(req.Env), cwd: req.Cwd, stdin: stdin, stdout: g.Stdout(), stderr: g.Stderr()})
	if err != nil {
		if runCtx.Err() != nil && ctx.Err() == nil {
			return compute.Errorf(compute.KindTimeout, op, err, "the command did not finish within %s and was killed", req.Timeout)
		}
		return err
	}
	return g.Exit(code)
}
