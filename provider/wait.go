package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// backoff yields exponentially growing intervals: initial, 2×, 4×, … capped at max.
type backoff struct {
	next, max time.Duration
}

func newBackoff(initial, max time.Duration) *backoff { return &backoff{next: initial, max: max} }

func (b *backoff) Next() time.Duration {
	d := b.next
	b.next *= 2
	if b.next > b.max {
		b.next = b.max
	}
	return d
}

// sleepCtx sleeps d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errWaitTimeout is returned when the deadline passes before the target state.
var errWaitTimeout = errors.New("timed out")

// Poll intervals: task environments follow the SDK's 1 s → 5 s (seed 000)
// and long-poll the status; sandboxes start in about a second and their GET
// cannot long-poll, so they are polled more finely (50 ms doubling to 500 ms): the cap
// is added, at worst, to every create.
var (
	envPollInitial     = 1 * time.Second
	envPollMax         = 5 * time.Second
	sandboxPollInitial = 50 * time.Millisecond
	sandboxPollMax     = 500 * time.Millisecond
)

// envWaitError is a failed wait for a task environment.
type envWaitError struct {
	id, target, state, detail string
	err                       error
}

func (e *envWaitError) Error() string {
	switch {
	case e.state == client.EnvFailed:
		if e.detail == "" {
			e.detail = "the server gave no error"
		}
		return fmt.Sprintf("task environment %s failed: %s", e.id, e.detail)
	case errors.Is(e.err, errWaitTimeout):
		return fmt.Sprintf("timed out waiting for task environment %s to become %s (last state %q)", e.id, e.target, e.state)
	case e.err != nil:
		return fmt.Sprintf("waiting for task environment %s to become %s (last state %q): %s", e.id, e.target, e.state, e.err)
	default:
		return fmt.Sprintf("task environment %s is %s, expected %s", e.id, e.state, e.target)
	}
}

func (e *envWaitError) Unwrap() error { return e.err }

// waitEnvironment polls GET …/environments/{id}/status until the environment
// is in state target. Each poll asks the server to hold the answer up to the
// current backoff interval (?wait=n) until the state changes; when the state
// is unchanged and the answer came early (a server that ignores wait), the
// rest of the interval is slept. failed is an error carrying the server's
// error; torn_down (or 404) is success only when target is torn_down.
func waitEnvironment(ctx context.Context, c *client.Client, org, ws, id, target string, last *client.Environment) (*client.Environment, error) {
	b := newBackoff(envPollInitial, envPollMax)
	prev := ""
	if last != nil {
		prev = last.State
	}
	for {
		d := b.Next()
		if dl, ok := ctx.Deadline(); ok {
			if rem := time.Until(dl); rem < d {
				d = rem
			}
		}
		start := time.Now()
		st, err := c.EnvironmentStatus(ctx, org, ws, id, d)
		switch {
		case err != nil && client.IsNotFound(err) && target == client.EnvTornDown:
			return &client.Environment{ID: id, State: client.EnvTornDown}, nil
		case err != nil && ctx.Err() != nil:
			return last, &envWaitError{id: id, target: target, state: prev, err: errWaitTimeout}
		case err != nil:
			return last, &envWaitError{id: id, target: target, state: prev, err: err}
		}
		last = st
		tflog.Debug(ctx, "task environment state", map[string]any{"id": id, "state": st.State, "target": target})
		switch {
		case st.State == target:
			return st, nil
		case st.State == client.EnvFailed && target == client.EnvTornDown:
			return st, nil // a failed environment holds nothing any more
		case st.State == client.EnvFailed:
			return st, &envWaitError{id: id, target: target, state: st.State, detail: st.ErrorText()}
		case st.State == client.EnvTornDown:
			return st, &envWaitError{id: id, target: target, state: st.State}
		}
		changed := prev != "" && st.State != prev
		prev = st.State
		if changed {
			continue // progress: ask again at once
		}
		if err := sleepCtx(ctx, d-time.Since(start)); err != nil {
			return last, &envWaitError{id: id, target: target, state: prev, err: errWaitTimeout}
		}
	}
}

// sandboxWaitError is a failed wait for a sandbox.
type sandboxWaitError struct {
	id, target, state, diagnostic string
	err                           error
}

func (e *sandboxWaitError) Error() string {
	switch {
	case e.state == client.SandboxFailed:
		if e.diagnostic == "" {
			e.diagnostic = "the server gave no diagnostic"
		}
		return fmt.Sprintf("sandbox %s failed: %s", e.id, e.diagnostic)
	case errors.Is(e.err, errWaitTimeout):
		return fmt.Sprintf("timed out waiting for sandbox %s to become %s (last state %q)", e.id, e.target, e.state)
	case e.err != nil:
		return fmt.Sprintf("waiting for sandbox %s to become %s (last state %q): %s", e.id, e.target, e.state, e.err)
	default:
		msg := fmt.Sprintf("sandbox %s is %s, expected %s", e.id, e.state, e.target)
		if e.diagnostic != "" {
			msg += ": " + e.diagnostic
		}
		return msg
	}
}

func (e *sandboxWaitError) Unwrap() error { return e.err }

// waitSandbox polls GET /sandboxes/{id} until the sandbox is in state target.
// failed is an error carrying the server's diagnostic; the other terminal
// states are errors unless target is deleted (404 then counts as deleted).
func waitSandbox(ctx context.Context, c *client.Client, id, target string, last *client.Sandbox) (*client.Sandbox, error) {
	b := newBackoff(sandboxPollInitial, sandboxPollMax)
	prev := ""
	if last != nil {
		prev = last.State
	}
	for {
		sb, err := c.GetSandbox(ctx, id)
		switch {
		case err != nil && client.IsNotFound(err) && target == client.SandboxDeleted:
			return &client.Sandbox{Sandbox: apitypes.Sandbox{SandboxID: id, State: client.SandboxDeleted}}, nil
		case err != nil && ctx.Err() != nil:
			return last, &sandboxWaitError{id: id, target: target, state: prev, err: errWaitTimeout}
		case err != nil:
			return last, &sandboxWaitError{id: id, target: target, state: prev, err: err}
		}
		last, prev = sb, sb.State
		tflog.Debug(ctx, "sandbox state", map[string]any{"id": id, "state": sb.State, "target": target})
		switch {
		case sb.State == target:
			return sb, nil
		case target == client.SandboxDeleted && client.SandboxGone(sb.State):
			return sb, nil
		case client.SandboxGone(sb.State):
			return sb, &sandboxWaitError{id: id, target: target, state: sb.State, diagnostic: sb.DiagnosticText()}
		}
		if err := sleepCtx(ctx, b.Next()); err != nil {
			return last, &sandboxWaitError{id: id, target: target, state: prev, err: errWaitTimeout}
		}
	}
}
