package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// execWrapper runs "$@" under timeout(1) when the image has it, so a command
// that outlives its budget is killed inside the container, not only
// abandoned by the backend. $0 is the budget in seconds.
const execWrapper = `if command -v timeout >/dev/null 2>&1; then exec timeout -k 2 "$0" "$@"; fi; exec "$@"`

// Exec runs argv in the container of service of environment envID with a
// budget of timeout, collecting up to maxOutput bytes of combined output. A
// command exceeding the budget is killed and reported with TimedOut and exit
// code 124. The container needs /bin/sh.
func (e *Groups) Exec(ctx context.Context, envID, service string, argv []string, timeout time.Duration, maxOutput int) (*compute.GroupExecResult, error) {
	out := &limitedBuffer{max: maxOutput}
	res, err := e.exec(ctx, envID, service, nil, argv, timeout, out, out)
	if res != nil {
		res.Output, res.Truncated = out.bytes()
	}
	return res, err
}

// ExecStream runs argv like Exec but emits its events as they happen: start
// (with the pid of the command's timeout(1) wrapper), stdout and stderr,
// exit. The result carries no Output.
func (e *Groups) ExecStream(ctx context.Context, envID, service string, argv []string, timeout time.Duration, emit compute.Emit) (*compute.GroupExecResult, error) {
	g := NewPIDGate(emit)
	res, err := e.exec(ctx, envID, service, []string{"sh", "-c", PIDScript, "sh"}, argv, timeout, g.Stdout(), g.Stderr())
	if err == nil {
		err = g.Exit(res.ExitCode)
	}
	return res, err
}

// exec runs prefix, the timeout wrapper and argv, copying the output to
// stdout and stderr from one goroutine.
func (e *Groups) exec(ctx context.Context, envID, service string, prefix, argv []string, timeout time.Duration, stdout, stderr io.Writer) (*compute.GroupExecResult, error) {
	name := GroupContainerName(envID, service)
	st, err := e.cli.ContainerInspect(ctx, name)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: service %q has no container", compute.ErrNotRunning, service)
		}
		return nil, perr(err, "inspecting service %q", service)
	}
	if st.State == nil || !st.State.Running || st.State.Paused || st.Config.Labels[compute.LabelGroupOwner] != e.owner {
		return nil, fmt.Errorf("%w: service %q is not running", compute.ErrNotRunning, service)
	}
	secs := int(timeout / time.Second)
	if secs < 1 {
		secs = 1
	}
	cmd := append(append(prefix, "sh", "-c", execWrapper, strconv.Itoa(secs)), argv...)
	created, err := e.cli.ContainerExecCreate(ctx, st.ID, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, perr(err, "running a command in service %q", service)
	}
	start := time.Now()
	att, err := e.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, perr(err, "running a command in service %q", service)
	}
	defer att.Close()
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	// The in-container timeout(1) fires at secs (+2 s to KILL); the backend
	// gives up a little later in case the image has no timeout(1).
	backstop := time.NewTimer(timeout + 4*time.Second)
	defer backstop.Stop()
	res := &compute.GroupExecResult{}
	select {
	case err := <-copied:
		if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
			return nil, perr(err, "reading the command's output")
		}
	case <-backstop.C:
		att.Close()
		_ = <-copied // the writers are the caller's again
		res.TimedOut = true
	case <-ctx.Done():
		att.Close()
		_ = <-copied
		return nil, context.Cause(ctx)
	}
	res.Duration = time.Since(start)
	if res.TimedOut {
		res.ExitCode = 124
		return res, nil
	}
	// The stream ends when the process exits; its exit code follows shortly.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for {
		in, err := e.cli.ContainerExecInspect(ictx, created.ID)
		if err != nil {
			return nil, perr(err, "reading the command's exit code")
		}
		if !in.Running {
			res.ExitCode = in.ExitCode
			break
		}
		if !sleepCtx(ictx, 20*time.Millisecond) {
			return nil, perr(ictx.Err(), "reading the command's exit code")
		}
	}
	// timeout(1) exits 124 when it stopped the command with TERM, 137 when it
	// had to KILL it.
	if res.Duration >= timeout && (res.ExitCode == 124 || res.ExitCode == 137) {
		res.TimedOut, res.ExitCode = true, 124
	}
	return res, nil
}

// limitedBuffer keeps the first max bytes written and counts the rest.
type limitedBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - len(b.buf)
	if room > 0 {
		n := min(room, len(p))
		b.buf = append(b.buf, p[:n]...)
		b.dropped += len(p) - n
	} else {
		b.dropped += len(p)
	}
	return len(p), nil
}

func (b *limitedBuffer) bytes() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...), b.dropped > 0
}
