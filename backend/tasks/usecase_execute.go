package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// ExecRequest is the body of POST /execute (the document's TaskExecRequest):
// Command is a JSON string (run with sh -c) or an array of strings, kept
// raw for parseCommand; TimeoutSec 1..MaxExecTimeoutSec
// (DefaultExecTimeoutSec when absent).
type ExecRequest = apitypes.TaskExecRequest

// ExecResponse is the answer of POST /execute (the document's TaskExecResult).
type ExecResponse = apitypes.TaskExecResult

const maxCommandLen = 64 * 1024

// execCall is a validated ExecRequest.
type execCall struct {
	argv       []string
	timeoutSec int
}

func (c execCall) timeout() time.Duration { return time.Duration(c.timeoutSec) * time.Second }

// prepareExec validates req and checks that e runs commands (ready).
func prepareExec(e *Env, req ExecRequest) (execCall, error) {
	argv, err := parseCommand(req.Command)
	if err != nil {
		return execCall{}, err
	}
	timeout := DefaultExecTimeoutSec
	if req.TimeoutSec != nil {
		timeout = *req.TimeoutSec
		if timeout < apitypes.TaskExecRequestTimeoutSecMinimum || timeout > MaxExecTimeoutSec {
			return execCall{}, domain.Invalid("timeout_sec", fmt.Sprintf("must be between %d and %d seconds, not %d", apitypes.TaskExecRequestTimeoutSecMinimum, MaxExecTimeoutSec, timeout))
		}
	}
	if e.State != taskenv.StateReady {
		msg := fmt.Sprintf("environment %s is %s; commands run only in a ready environment", e.ID, e.State)
		if e.State == taskenv.StatePaused {
			msg += " (resume it first)"
		}
		return execCall{}, domain.ConflictIn(string(e.State), msg)
	}
	return execCall{argv: argv, timeoutSec: timeout}, nil
}

// notStopping refuses a command in an environment whose record is stopping:
// its end was decided (billing stopped) and its containers are being
// removed, though the environment shows ready until they are gone.
func (s *Service) notStopping(ctx context.Context, e *Env) error {
	r, err := s.db.GetRecord(ctx, e.RecordID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil // no record to end it (not made by Create): the state decides
	case err != nil:
		return err
	case r.Phase == sandbox.PhaseStopping:
		return domain.ConflictIn(string(e.State), fmt.Sprintf("environment %s cannot run commands: it is being torn down", e.ID))
	}
	return nil
}

// Execute runs req's command in e's execute service and returns its
// buffered result: a command that exceeds its timeout is killed (exit code
// 124, timed_out), output past DefaultMaxExecOutput is cut (truncated), and
// the note says so. A service that is not running is a conflict.
func (s *Service) Execute(ctx context.Context, e *Env, req ExecRequest) (*ExecResponse, error) {
	call, err := prepareExec(e, req)
	if err != nil {
		return nil, err
	}
	if err := s.notStopping(ctx, e); err != nil {
		return nil, err
	}
	res, err := s.engine.Exec(ctx, e.ID, e.ExecuteService, call.argv, call.timeout(), DefaultMaxExecOutput)
	if err != nil {
		return nil, execErr(e, err)
	}
	out := &ExecResponse{ExitCode: res.ExitCode, Output: strings.ToValidUTF8(string(res.Output), "\uFFFD"), TimedOut: res.TimedOut,
		Truncated: res.Truncated, DurationMs: res.Duration.Milliseconds(), Service: e.ExecuteService}
	if res.TimedOut {
		out.Note = fmt.Sprintf("the command exceeded timeout_sec (%d s) and was killed; exit_code 124 means timed out", call.timeoutSec)
	}
	if res.Truncated {
		note := fmt.Sprintf("output truncated to the first %d bytes", DefaultMaxExecOutput)
		if out.Note != "" {
			out.Note += "; " + note
		} else {
			out.Note = note
		}
	}
	return out, nil
}

// ExecuteStream is Execute with the command's events (start, stdout,
// stderr, exit) handed to emit as they happen. An engine that does not
// stream (StreamExecer) runs the command buffered and emits its output at
// the end. An error before the first event is the answer; after it, the
// stream's last word.
func (s *Service) ExecuteStream(ctx context.Context, e *Env, req ExecRequest, emit compute.Emit) error {
	call, err := prepareExec(e, req)
	if err != nil {
		return err
	}
	if err := s.notStopping(ctx, e); err != nil {
		return err
	}
	started := false
	track := func(ev compute.ProcessEvent) error {
		started = true
		return emit(ev)
	}
	err = errors.ErrUnsupported
	if se, ok := s.engine.(StreamExecer); ok {
		_, err = se.ExecStream(ctx, e.ID, e.ExecuteService, call.argv, call.timeout(), track)
	}
	if errors.Is(err, errors.ErrUnsupported) && !started {
		var res *compute.GroupExecResult
		if res, err = s.engine.Exec(ctx, e.ID, e.ExecuteService, call.argv, call.timeout(), DefaultMaxExecOutput); err == nil {
			for _, ev := range []compute.ProcessEvent{{Type: compute.EventStart}, {Type: compute.EventStdout, Data: res.Output},
				{Type: compute.EventExit, ExitCode: res.ExitCode}} {
				if err = track(ev); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		return execErr(e, err)
	}
	return nil
}

// execErr words an engine's failure to run a command in e: a service that
// is not running is a conflict; a refusal the engine worded a provider error.
func execErr(e *Env, err error) error {
	if errors.Is(err, compute.ErrNotRunning) {
		return domain.ConflictIn(string(e.State), fmt.Sprintf("environment %s cannot run commands now: %v", e.ID, err))
	}
	return providerErr(err)
}

// parseCommand accepts a string (run with sh -c) or an array of strings.
func parseCommand(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, domain.Invalid("command", "required: a string (run with sh -c) or an array of strings")
	}
	if len(raw) > maxCommandLen {
		return nil, domain.Invalid("command", fmt.Sprintf("longer than %d bytes", maxCommandLen))
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		if strings.TrimSpace(str) == "" {
			return nil, domain.Invalid("command", "must not be empty")
		}
		if strings.ContainsRune(str, 0) {
			return nil, domain.Invalid("command", "must not contain NUL bytes")
		}
		return []string{"sh", "-c", str}, nil
	}
	var argv []string
	if err := json.Unmarshal(raw, &argv); err != nil {
		return nil, domain.Invalid("command", "must be a string or an array of strings")
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, domain.Invalid("command", "must be a non-empty array whose first element names the program")
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, invalidAt("must not contain NUL bytes", "command", i)
		}
	}
	return argv, nil
}
