package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// readyEvery is how often the ready command is retried until it succeeds.
const readyEvery = time.Second

// idle keeps the start check's container running while the start and
// ready commands are executed in it.
var idle = []string{"/bin/sh", "-c", "sleep infinity 2>/dev/null || while :; do sleep 3600; done"}

// errReadyTime is the cause of the ready wait past its limit.
var errReadyTime = errors.New("ready time limit")

// checkStart runs the template's start command in a contained container of
// the final image and waits for its ready command to succeed, as a sandbox
// start does, logging as E2B does. The container is removed after.
func (r *run) checkStart(ctx context.Context, imageID string, start compute.StartCommand) error {
	const step = "finalize"
	id, err := r.create(ctx, imageID, state{}, "", idle)
	if err != nil {
		return r.engineErr(0, "creating the start check's container", err)
	}
	defer r.remove(ctx, id)
	qctx, cancel := quiet(ctx)
	err = r.b.h.Client.ContainerStart(qctx, id, container.StartOptions{})
	cancel()
	if err != nil {
		return r.engineErr(0, "starting the start check's container", err)
	}
	rctx, rcancel := context.WithTimeoutCause(ctx, r.req.Limits.ReadyTime, errReadyTime)
	defer rcancel()
	startDone := make(chan int, 1)
	if start.Cmd != "" {
		r.log.info(step, "Running start command: "+start.Cmd)
		go func() {
			code, err := r.exec(rctx, id, start, start.Cmd, "[start] ")
			if err != nil {
				code = -1
			}
			startDone <- code
		}()
	}
	fail := func(code int) error {
		return &compute.TemplateBuildError{Kind: compute.KindEntrypoint,
			Msg: fmt.Sprintf("the start command exited with code %d before the template was ready; its output is in the build's log", code)}
	}
	if start.ReadyCmd != "" {
		r.log.info(step, "Waiting for template to be ready: "+start.ReadyCmd)
		for {
			code, err := r.exec(rctx, id, start, start.ReadyCmd, "[ready] ")
			if err == nil && code == 0 {
				break
			}
			select {
			case c := <-startDone:
				if c != 0 {
					return fail(c)
				}
				startDone <- c // seen; keep it for the check below
			default:
			}
			select {
			case <-rctx.Done():
				return r.readyErr(ctx, rctx)
			case <-time.After(readyEvery):
			}
		}
	}
	// A start command that already ended must have succeeded; one still
	// running is the template's process.
	select {
	case c := <-startDone:
		if c != 0 {
			return fail(c)
		}
	default:
		if start.ReadyCmd == "" && start.Cmd != "" {
			// Nothing to wait on: give a quick command the moment to end
			// (and its output to arrive), never more than a second.
			select {
			case c := <-startDone:
				if c != 0 {
					return fail(c)
				}
			case <-time.After(readyEvery):
			}
		}
	}
	r.log.info(step, "Template is ready")
	return nil
}

func (r *run) readyErr(ctx, rctx context.Context) error {
	if ctx.Err() != nil {
		return ctxErr(ctx, 0, r.req.Limits.BuildTime)
	}
	return &compute.TemplateBuildError{Kind: compute.KindResourceLimit, Limit: compute.LimitReadyTime, Err: context.Cause(rctx),
		Msg: fmt.Sprintf("the ready command did not succeed within the ready time limit of %s; check it, or make the start command come up sooner", r.req.Limits.ReadyTime)}
}

// exec runs cmd in container id with the start command's context and
// returns its exit code, logging its output lines with prefix.
func (r *run) exec(ctx context.Context, id string, start compute.StartCommand, cmd, prefix string) (int, error) {
	cli := r.b.h.Client
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd: shellOf(cmd), Env: start.Env, WorkingDir: start.Dir, User: start.User,
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return 0, err
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, err
	}
	defer att.Close()
	out := &lineWriter{emit: func(s string) { r.log.output("finalize", prefix+"[stdout]: "+s) }}
	errw := &lineWriter{emit: func(s string) { r.log.output("finalize", prefix+"[stderr]: "+s) }}
	copied := make(chan struct{})
	go func() {
		_, _ = stdcopy.StdCopy(out, errw, att.Reader)
		close(copied)
	}()
	select {
	case <-copied:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	out.flush()
	errw.flush()
	ins, err := cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return 0, err
	}
	return ins.ExitCode, nil
}
