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

// errWaitTimeout is returned when the deadline passes before the target state.
var errWaitTimeout = errors.New("timed out")

// Poll intervals (client.WaitState runs the waits): task environments are
// polled 1 s doubling to 5 s, as dn does, each poll long-polling the status; sandboxes start in about a second and their GET
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
	prev := ""
	if last != nil {
		prev = last.State
	}
	final := func(s string) bool { return s == target || s == client.EnvFailed || s == client.EnvTornDown }
	// The state given is not taken as final: the first poll comes at once.
	state, err := client.WaitState(ctx, "", final, func(ctx context.Context, _ string, hold time.Duration) (string, error) {
		st, err := c.EnvironmentStatus(ctx, org, ws, id, hold)
		if err != nil && client.IsNotFound(err) && target == client.EnvTornDown {
			st = &client.Environment{TaskEnvironment: apitypes.TaskEnvironment{ID: id, State: client.EnvTornDown}}
		} else if err != nil {
			return "", err
		}
		last, prev = st, st.State
		tflog.Debug(ctx, "task environment state", map[string]any{"id": id, "state": st.State, "target": target})
		return st.State, nil
	}, client.WaitOptions{Initial: envPollInitial, Max: envPollMax, LongPoll: true, PollFirst: true})
	var de *client.WaitDeadlineError
	switch {
	case errors.As(err, &de) || (err != nil && ctx.Err() != nil):
		return last, &envWaitError{id: id, target: target, state: prev, err: errWaitTimeout}
	case err != nil:
		return last, &envWaitError{id: id, target: target, state: prev, err: err}
	case state == target:
		return last, nil
	case state == client.EnvFailed && target == client.EnvTornDown:
		return last, nil // a failed environment holds nothing any more
	case state == client.EnvFailed:
		return last, &envWaitError{id: id, target: target, state: state, detail: last.ErrorText()}
	default: // torn down
		return last, &envWaitError{id: id, target: target, state: state}
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
	prev := ""
	if last != nil {
		prev = last.State
	}
	final := func(s string) bool { return s == target || client.SandboxGone(s) }
	// The state given is not taken as final: the first poll comes at once.
	state, err := client.WaitState(ctx, "", final, func(ctx context.Context, _ string, _ time.Duration) (string, error) {
		sb, err := c.GetSandbox(ctx, id)
		if err != nil && client.IsNotFound(err) && target == client.SandboxDeleted {
			sb = &client.Sandbox{Sandbox: apitypes.Sandbox{SandboxID: id, State: client.SandboxDeleted}}
		} else if err != nil {
			return "", err
		}
		last, prev = sb, sb.State
		tflog.Debug(ctx, "sandbox state", map[string]any{"id": id, "state": sb.State, "target": target})
		return sb.State, nil
	}, client.WaitOptions{Initial: sandboxPollInitial, Max: sandboxPollMax, PollFirst: true})
	var de *client.WaitDeadlineError
	switch {
	case errors.As(err, &de) || (err != nil && ctx.Err() != nil):
		return last, &sandboxWaitError{id: id, target: target, state: prev, err: errWaitTimeout}
	case err != nil:
		return last, &sandboxWaitError{id: id, target: target, state: prev, err: err}
	case state == target, target == client.SandboxDeleted:
		return last, nil
	default: // gone in another way
		return last, &sandboxWaitError{id: id, target: target, state: state, diagnostic: last.DiagnosticText()}
	}
}
