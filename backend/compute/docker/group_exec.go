package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
)

// Exec runs argv in the container of service of environment envID with a
// budget of timeout, collecting up to maxOutput bytes of combined output. A
// command exceeding the budget is killed and reported with TimedOut and exit
// code 124. It runs through the service's agent (group_agent.go), so the
// image needs nothing (no shell, no timeout(1)).
func (e *Groups) Exec(ctx context.Context, envID, service string, argv []string, timeout time.Duration, maxOutput int) (*compute.GroupExecResult, error) {
	out := &limitedBuffer{max: maxOutput}
	res, err := e.exec(ctx, envID, service, argv, timeout, func(ev compute.ProcessEvent) error {
		if ev.Type == compute.EventStdout || ev.Type == compute.EventStderr {
			_, _ = out.Write(ev.Data)
		}
		return nil
	})
	if res != nil {
		res.Output, res.Truncated = out.bytes()
	}
	return res, err
}

// ExecStream runs argv like Exec but emits its events as they happen: start
// (with the command's pid, in the container, as the agent reports it),
// stdout and stderr, exit (124 when the budget ran out). The result carries
// no Output.
func (e *Groups) ExecStream(ctx context.Context, envID, service string, argv []string, timeout time.Duration, emit compute.Emit) (*compute.GroupExecResult, error) {
	return e.exec(ctx, envID, service, argv, timeout, emit)
}

// exec runs argv with the agent's Start stream (the envd client the
// sandboxes use: each message it reads is bounded, and the command is
// killed when the budget passes, ctx ends or emit fails), emitting start,
// output and exit.
func (e *Groups) exec(ctx context.Context, envID, service string, argv []string, timeout time.Duration, emit compute.Emit) (*compute.GroupExecResult, error) {
	op := fmt.Sprintf("running a command in service %q", service)
	if len(argv) == 0 || argv[0] == "" {
		return nil, perr(errors.New("no command given"), "%s", op)
	}
	c, st, err := e.agentOf(ctx, envID, service)
	if err != nil {
		return nil, err
	}
	since, _ := time.Parse(time.RFC3339Nano, st.State.StartedAt)
	res := &compute.GroupExecResult{}
	began := false
	track := func(ev compute.ProcessEvent) error {
		switch ev.Type {
		case compute.EventStart:
			began = true
		case compute.EventExit:
			res.ExitCode = ev.ExitCode
		}
		return emit(ev)
	}
	start := time.Now()
	// In the container's working directory, as the engine's exec ran it
	// (the agent's default is the user's home).
	req := compute.ExecRequest{Cmd: argv, Timeout: timeout, Cwd: cmp.Or(st.Config.WorkingDir, "/")}
	// An agent still starting (in a service Bring has just started)
	// refuses the connection: nothing ran, so the call is repeated while
	// the container is young enough for its agent to be starting.
	_, err = backoff.Retry(ctx, func() (struct{}, error) {
		err := c.ExecStream(ctx, req, nil, track)
		if err != nil && !began && errors.Is(err, syscall.ECONNREFUSED) && time.Since(since) < agentReadyTimeout {
			return struct{}{}, err
		}
		return struct{}{}, backoff.Permanent(err)
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 10 * time.Millisecond, Multiplier: 2, MaxInterval: 500 * time.Millisecond}),
		backoff.WithMaxElapsedTime(agentReadyTimeout))
	res.Duration = time.Since(start)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	msg, notRun := notRunnable(err)
	switch {
	case err == nil:
		return res, nil
	case compute.KindOf(err) == compute.KindTimeout:
		// The budget ran out: the client killed the command.
		res.TimedOut, res.ExitCode = true, 124
		return res, emitAll(track, !began, compute.ProcessEvent{Type: compute.EventExit, ExitCode: 124})
	case notRun && !began:
		// A command that cannot be found or run is its exit code 127, as in a shell.
		res.ExitCode = 127
		return res, emitAll(track, true, compute.ProcessEvent{Type: compute.EventStderr, Data: []byte(msg + "\n")},
			compute.ProcessEvent{Type: compute.EventExit, ExitCode: 127})
	case errors.Is(err, compute.ErrNotRunning):
		return nil, err
	}
	return nil, perr(err, "%s", op)
}

// emitAll emits evs, after a start event without a pid when withStart.
func emitAll(emit compute.Emit, withStart bool, evs ...compute.ProcessEvent) error {
	if withStart {
		evs = append([]compute.ProcessEvent{{Type: compute.EventStart}}, evs...)
	}
	for _, ev := range evs {
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// agentOf is a client of the agent of service's running container in
// environment envID, and the container.
func (e *Groups) agentOf(ctx context.Context, envID, service string) (*envd.Client, container.InspectResponse, error) {
	st, err := e.running(ctx, envID, service)
	if err != nil {
		return nil, st, err
	}
	if !hasAgent(st) {
		return nil, st, perr(errors.New("its container runs without the in-container agent that runs commands (it was started by an older backend, or by one without DREADNODE_AGENT_BINARY); remove the environment and start it again"),
			"running a command in service %q", service)
	}
	ip := agentIP(st)
	if ip == "" {
		return nil, st, perr(errors.New("its container has no network address to reach its agent at"), "running a command in service %q", service)
	}
	token := e.agentKey.tokenOf(st)
	return &envd.Client{HTTP: e.agentHTTP, URL: envdURL(ip), Token: token, Agent: true,
		Name: fmt.Sprintf("service %q", service), Daemon: "the service's agent",
		Diagnose: func(ctx context.Context, _ string, err error) error {
			// The agent does not answer: a container stopped or paused
			// under the call is not running, as before the call.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, rerr := e.running(dctx, envID, service); errors.Is(rerr, compute.ErrNotRunning) {
				return rerr
			}
			return err
		}}, st, nil
}

// running inspects service's container in environment envID: one of this
// owner's, running and not paused, or compute.ErrNotRunning.
func (e *Groups) running(ctx context.Context, envID, service string) (container.InspectResponse, error) {
	st, err := e.cli.ContainerInspect(ctx, GroupContainerName(envID, service))
	if err != nil {
		if errdefs.IsNotFound(err) {
			return st, fmt.Errorf("%w: service %q has no container", compute.ErrNotRunning, service)
		}
		return st, perr(err, "inspecting service %q", service)
	}
	if st.State == nil || !st.State.Running || st.State.Paused || st.Config == nil || st.Config.Labels[compute.LabelGroupOwner] != e.owner {
		return st, fmt.Errorf("%w: service %q is not running", compute.ErrNotRunning, service)
	}
	return st, nil
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
