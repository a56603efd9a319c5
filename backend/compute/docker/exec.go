package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// execMarkerEnv is set on every Exec so that a timed-out command and all its
// descendants can be found (via /proc/*/environ) and killed: Docker has no
// API to kill an exec, and killing the container is not an option.
const execMarkerEnv = "DREADNODE_EXEC_ID"

const killScript = `for d in /proc/[0-9]*; do
  grep -qF "` + execMarkerEnv + `=$1" "$d/environ" 2>/dev/null && kill -9 "${d#/proc/}" 2>/dev/null
done
exit 0`

// Exec implements compute.Provider. A paused or stopped instance answers
// KindConflict. When req.Timeout (or ctx) expires the command's processes are
// killed, nothing else, and the output so far is returned with KindTimeout.
// The command sees DREADNODE_EXEC_ID in its environment (see execMarkerEnv);
// the kill needs sh and grep in the image, otherwise the command is left to
// finish on its own.
func (p *Provider) Exec(ctx context.Context, ref compute.Ref, req compute.ExecRequest) (compute.ExecResult, error) {
	const op = "exec"
	if len(req.Cmd) == 0 {
		return compute.ExecResult{}, compute.Errorf(compute.KindInvalid, op, nil, "cmd must not be empty")
	}
	if req.Cwd != "" && !path.IsAbs(req.Cwd) {
		return compute.ExecResult{}, compute.Errorf(compute.KindInvalid, op, nil, "cwd must be an absolute path, got %q", req.Cwd)
	}
	marker := randomHex(12)
	opts := container.ExecOptions{
		Cmd:        req.Cmd,
		Env:        append(env(req.Env), execMarkerEnv+"="+marker),
		WorkingDir: req.Cwd,
	}
	res, running, err := p.runExec(ctx, ref.ID, opts, req.Timeout)
	if running {
		p.killExec(ref.ID, marker)
		if ctx.Err() == nil {
			return res, compute.Errorf(compute.KindTimeout, op, err, "the command did not finish within %s and was killed", req.Timeout)
		}
	}
	return res, err
}

// runExec runs one exec until it exits, timeout (when > 0) passes or ctx is
// done. running reports that we stopped waiting while it may still run.
// It keeps at most compute.MaxExecOutputBytes of each stream; the rest is
// dropped so a chatty command cannot exhaust the backend's memory.
func (p *Provider) runExec(ctx context.Context, id string, opts container.ExecOptions, timeout time.Duration) (res compute.ExecResult, running bool, err error) {
	return p.runExecKeeping(ctx, id, opts, timeout, compute.MaxExecOutputBytes)
}

// runExecKeeping is runExec keeping at most keep bytes of each stream.
func (p *Provider) runExecKeeping(ctx context.Context, id string, opts container.ExecOptions, timeout time.Duration, keep int) (res compute.ExecResult, running bool, err error) {
	const op = "exec"
	opts.AttachStdout, opts.AttachStderr = true, true
	created, err := p.cli.ContainerExecCreate(ctx, id, opts)
	if err != nil {
		return res, false, classify(op, err)
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	hj, err := p.cli.ContainerExecAttach(runCtx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return res, runCtx.Err() != nil, classify(op, err)
	}
	defer hj.Close()

	stdout, stderr := &compute.CappedBuffer{Max: keep}, &compute.CappedBuffer{Max: keep}
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
		done <- err
	}()
	select {
	case err = <-done:
	case <-runCtx.Done():
		hj.Close() // unblocks StdCopy
		_ = <-done // so the buffers are ours again
		err = runCtx.Err()
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if err != nil {
		return res, runCtx.Err() != nil, classify(op, err)
	}
	// The stream ends when the process closed its output, which is usually
	// but not always its exit: poll the exit code until runCtx is done.
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		ins, err := p.cli.ContainerExecInspect(runCtx, created.ID)
		if err != nil {
			return res, runCtx.Err() != nil, classify(op, err)
		}
		if !ins.Running {
			res.ExitCode = ins.ExitCode
			return res, false, nil
		}
		select {
		case <-runCtx.Done():
			return res, true, classify(op, runCtx.Err())
		case <-time.After(wait):
		}
	}
}

// killExec kills every process of one Exec (see execMarkerEnv). Its output
// (from the sandbox's own sh) is not kept.
func (p *Provider) killExec(id, marker string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, _ = p.runExecKeeping(ctx, id, container.ExecOptions{
		User: "0", Cmd: []string{"sh", "-c", killScript, "sh", marker},
	}, 0, 0)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
