package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
	"github.com/dreadnode/terraform-provider-dreadnode/cmd/dn/internal/config"
)

func (a *app) envCmd() *cobra.Command {
	return group("env", "Task environments: create, wait, status, exec, pause, resume, delete",
		a.envCreateCmd(), a.envWaitCmd(), a.envStatusCmd(), a.envListCmd(), a.envGetCmd(), a.envExecCmd(),
		a.envActionCmd("pause", "Pause a ready environment (paused environments accrue no runtime)"),
		a.envActionCmd("resume", "Resume a paused environment"),
		a.envDeleteCmd(), a.envForkCmd())
}

// envFinal: states a wait stops at (ready, and what never becomes ready).
func envFinal(s string) bool {
	return s != client.EnvBuilding && s != client.EnvProvisioning
}

func (a *app) envCreateCmd() *cobra.Command {
	var inputs []string
	var timeoutSec int64
	var wait bool
	cmd := &cobra.Command{
		Use:   "create <task_ref>",
		Short: "Provision a task environment ([org/]name[@version]) and optionally wait until it is ready",
		Long: `Provision a task environment. The API answers at once with state "building"
and the environment's execute token, which it shows only this once: dn keeps it
(mode 0600, one file per environment id) so that 'dn env exec <id>' works.

With --wait, dn prints each state as it is reached (building, provisioning,
ready) with the time elapsed, then the service URLs, the instruction and the
execute token. The wait uses the server's long poll, else polls with backoff
(1 s to 5 s). Its deadline is --timeout-sec when given (which is also the
environment's lifetime on the server), else 15 minutes. A "failed" environment
exits 1 with the server's error; a deadline passed exits 3 (the environment
keeps going: 'dn env wait <id>' resumes waiting).`,
		Example: `  dn env create web-login --wait
  dn env create web-login --input flag='FLAG{x}' --timeout-sec 1800 --wait --json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			in, err := parsePairs("input", inputs)
			if err != nil {
				return err
			}
			if err := positive(cmd, "timeout-sec", timeoutSec); err != nil {
				return err
			}
			c, org, ws, err := a.scope()
			if err != nil {
				return err
			}
			start := time.Now()
			body := client.EnvironmentCreate{TaskRef: argv[0], Inputs: in}
			body.TimeoutSec = optionalInt(timeoutSec)
			env, err := c.CreateEnvironment(cmd.Context(), org, ws, body, client.NewIdempotencyKey())
			if err != nil {
				return err
			}
			token := env.ExecuteToken
			kept, keepErr := "", error(nil)
			if token != "" {
				kept, keepErr = a.tokens().Put(config.KindEnvironment, env.ID, token)
				if keepErr != nil {
					fmt.Fprintf(a.io.Err, "dn: warning: could not keep the execute token (%v); save it now, it is not shown again\n", keepErr)
				}
			}
			if !wait {
				if a.json {
					return a.printJSON(envJSON(env))
				}
				_ = a.fields("Environment", env.ID, "Task", env.TaskRef, "State", env.State)
				a.printSecret("Execute token", token, kept, fmt.Sprintf("'dn env exec %s -- <command>' uses it", env.ID))
				fmt.Fprintf(a.io.Out, "Wait until it is ready: dn env wait %s\n", env.ID)
				return nil
			}
			deadline, why := waitDeadline(start, timeoutSec)
			final, err := a.waitEnv(cmd.Context(), c, org, ws, env, start, deadline, why, kept)
			if err != nil {
				return err
			}
			final.ExecuteToken = token
			if a.json {
				return a.printJSON(envJSON(final))
			}
			a.printEnvSummary(final)
			a.printSecret("Execute token", token, kept, fmt.Sprintf("'dn env exec %s -- <command>' uses it", env.ID))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&inputs, "input", nil, "task input KEY=VALUE (repeatable)")
	f.Int64Var(&timeoutSec, "timeout-sec", 0, "lifetime of the environment in seconds, and the wait's deadline (default: server's lifetime, 15 min wait)")
	f.BoolVar(&wait, "wait", false, "wait until the environment is ready, printing each state")
	return cmd
}

// waitDeadline is start plus --timeout-sec, else plus 15 minutes, and how
// to name it in a timeout message.
func waitDeadline(start time.Time, timeoutSec int64) (time.Time, string) {
	if timeoutSec > 0 {
		return start.Add(time.Duration(timeoutSec) * time.Second), fmt.Sprintf("--timeout-sec %d", timeoutSec)
	}
	return start.Add(DefaultWaitDeadline), "the default 15 minutes"
}

// waitEnv waits from env's state until a final state. ready (or paused)
// returns the full environment; failed, torn_down and the deadline are
// errors that say what to do.
func (a *app) waitEnv(ctx context.Context, c *client.Client, org, ws string, env *client.Environment, start, deadline time.Time, why, kept string) (*client.Environment, error) {
	out := a.io.Out
	if a.json {
		out = a.io.Err // stdout stays one JSON document
	}
	p := a.newProgress(start)
	defer p.stop()
	last := env
	w := &waiter{start: start, deadline: deadline, longPoll: true, out: out, p: p, what: "environment " + env.ID}
	state, err := w.run(ctx, env.State, envFinal, func(ctx context.Context, since string, hold time.Duration) (string, error) {
		st, err := c.EnvironmentStatusChange(ctx, org, ws, env.ID, since, hold)
		if err != nil {
			return "", err
		}
		last = st
		return st.State, nil
	})
	hint := fmt.Sprintf("It keeps going on the server. Resume waiting: dn env wait %s\nCheck it: dn env status %s\nGive up: dn env delete %s", env.ID, env.ID, env.ID)
	if kept != "" {
		hint += "\nIts execute token is kept in " + kept + "."
	}
	var de *errDeadline
	if errors.As(err, &de) {
		return nil, &exitError{code: ExitTimeout, hint: hint,
			msg: fmt.Sprintf("environment %s is still %s after %s (deadline: %s)", env.ID, state, elapsed(time.Since(start)), why)}
	}
	if errors.Is(err, errInterrupted) {
		return nil, &exitError{code: ExitInterrupted, hint: hint, msg: fmt.Sprintf("interrupted while environment %s is %s", env.ID, state)}
	}
	if err != nil {
		return nil, err
	}
	switch state {
	case client.EnvFailed:
		return nil, failErr(fmt.Sprintf("Inspect the task with: dn task info %s\nFix the task or its inputs, then create a new environment (dn env delete %s removes this one).", env.TaskRef, env.ID),
			"environment %s failed: %s", env.ID, orDash(last.ErrorText()))
	case client.EnvTornDown:
		return nil, failErr("It was deleted or expired; create a new one with dn env create.", "environment %s was torn down", env.ID)
	}
	full, err := c.GetEnvironment(ctx, org, ws, env.ID)
	if err != nil {
		return nil, err
	}
	return full, nil
}

func (a *app) printEnvSummary(e *client.Environment) {
	fmt.Fprintf(a.io.Out, "Environment %s is %s (task %s).\n", e.ID, e.State, e.TaskRef)
	if e.ExpiresAt != nil {
		fmt.Fprintf(a.io.Out, "Expires: %s\n", client.TimeText(e.ExpiresAt))
	}
	if len(e.ServiceURLs) > 0 {
		fmt.Fprintln(a.io.Out, "Service URLs:")
		printEndpoints(a.io.Out, e.ServiceURLs)
	}
	if in := strings.TrimSpace(deref(e.Instruction)); in != "" {
		fmt.Fprintln(a.io.Out, "Instruction:")
		fmt.Fprintln(a.io.Out, indent(in, "  "))
	}
	if t := e.ErrorText(); t != "" {
		fmt.Fprintf(a.io.Out, "Error: %s\n", t)
	}
}

// envJSON is an environment for --json: the token only when known.
func envJSON(e *client.Environment) map[string]any {
	m := withoutEmpty(e, "execute_token")
	if len(e.Error) == 0 {
		m["error"] = nil
	}
	return m
}

func (a *app) envWaitCmd() *cobra.Command {
	var timeoutSec int64
	cmd := &cobra.Command{
		Use:   "wait <id>",
		Short: "Wait until an environment is ready, printing each state (exit 3 at the deadline)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := positive(cmd, "timeout-sec", timeoutSec); err != nil {
				return err
			}
			c, org, ws, err := a.scope()
			if err != nil {
				return err
			}
			start := time.Now()
			env, err := c.EnvironmentStatus(cmd.Context(), org, ws, argv[0], 0)
			if err != nil {
				return err
			}
			env.ID = argv[0]
			if full, err := c.GetEnvironment(cmd.Context(), org, ws, argv[0]); err == nil {
				env.TaskRef = full.TaskRef
			}
			deadline, why := waitDeadline(start, timeoutSec)
			kept, _ := a.tokens().Path(config.KindEnvironment, env.ID)
			if _, err := a.tokens().Get(config.KindEnvironment, env.ID); err != nil {
				kept = ""
			}
			final, err := a.waitEnv(cmd.Context(), c, org, ws, env, start, deadline, why, kept)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(envJSON(final))
			}
			a.printEnvSummary(final)
			if kept != "" {
				fmt.Fprintf(a.io.Out, "Its execute token is kept in %s; 'dn env exec %s -- <command>' uses it.\n", kept, final.ID)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&timeoutSec, "timeout-sec", 0, "deadline of the wait in seconds (default 15 minutes)")
	return cmd
}

// envStatus is the exact shape of 'dn env status --json' (docs/cli.md).
type envStatus struct {
	ID          string           `json:"id"`
	State       string           `json:"state"`
	ExpiresAt   *string          `json:"expires_at"`
	ServiceURLs client.Endpoints `json:"service_urls"`
}

func (a *app) envStatusCmd() *cobra.Command {
	return a.scopedCmd("status", `An environment's state; --json prints {"id","state","expires_at","service_urls"}`,
		func(ctx context.Context, c *client.Client, org, ws, id string) error {
			st, err := c.EnvironmentStatus(ctx, org, ws, id, 0)
			if err != nil {
				return err
			}
			out := envStatus{ID: st.ID, State: st.State, ServiceURLs: st.ServiceURLs}
			if st.ExpiresAt != nil {
				at := client.TimeText(st.ExpiresAt)
				out.ExpiresAt = &at
			}
			if a.json {
				return a.printJSON(out)
			}
			_ = a.fields("Environment", st.ID, "State", st.State, "Expires", client.TimeText(st.ExpiresAt), "Error", st.ErrorText())
			if len(st.ServiceURLs) > 0 {
				fmt.Fprintln(a.io.Out, "Service URLs:")
				printEndpoints(a.io.Out, st.ServiceURLs)
			}
			return nil
		})
}

func (a *app) envListCmd() *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's environments",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, ws, err := a.scope()
			if err != nil {
				return err
			}
			envs, err := c.ListEnvironments(cmd.Context(), org, ws, state)
			if err != nil {
				return err
			}
			if a.json {
				out := make([]map[string]any, len(envs))
				for i := range envs {
					out[i] = envJSON(&envs[i])
				}
				return a.printJSON(out)
			}
			rows := make([][]string, len(envs))
			for i, e := range envs {
				rows[i] = []string{e.ID, e.TaskRef, e.State, orDash(client.TimeText(&e.CreatedAt)), orDash(client.TimeText(e.ExpiresAt))}
			}
			return a.table([]string{"ID", "TASK", "STATE", "CREATED", "EXPIRES"}, rows)
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only environments in these states (comma-separated: building, provisioning, ready, paused, torn_down, failed)")
	return cmd
}

func (a *app) envGetCmd() *cobra.Command {
	return a.scopedCmd("get", "Show an environment: state, service URLs, instruction, error",
		func(ctx context.Context, c *client.Client, org, ws, id string) error {
			e, err := c.GetEnvironment(ctx, org, ws, id)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(envJSON(e))
			}
			a.printEnvSummary(e)
			return nil
		})
}

func (a *app) envActionCmd(action, short string) *cobra.Command {
	return a.scopedCmd(action, short, func(ctx context.Context, c *client.Client, org, ws, id string) error {
		do := c.PauseEnvironment
		if action == "resume" {
			do = c.ResumeEnvironment
		}
		if err := do(ctx, org, ws, id); err != nil {
			return err
		}
		return a.showEnvState(ctx, c, org, ws, id)
	})
}

func (a *app) showEnvState(ctx context.Context, c *client.Client, org, ws, id string) error {
	e, err := c.GetEnvironment(ctx, org, ws, id)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(envJSON(e))
	}
	fmt.Fprintf(a.io.Out, "Environment %s is %s.\n", e.ID, e.State)
	return nil
}

func (a *app) envDeleteCmd() *cobra.Command {
	return a.scopedCmd("delete", "Tear an environment down (and forget its kept execute token)",
		func(ctx context.Context, c *client.Client, org, ws, id string) error {
			if err := c.DeleteEnvironment(ctx, org, ws, id); err != nil {
				return err
			}
			_ = a.tokens().Delete(config.KindEnvironment, id)
			return a.showEnvState(ctx, c, org, ws, id)
		})
}

func lostEnvToken(id string) string {
	return fmt.Sprintf("The execute token is shown only in the answer of 'dn env create' and cannot be read back from the API.\n"+
		"If you have it, pass it with --token. If it is lost, delete the environment and provision a new one:\n"+
		"  dn env delete %s\n  dn env create <task_ref> --wait", id)
}

func (a *app) envExecCmd() *cobra.Command {
	var token string
	var timeoutSec int64
	cmd := &cobra.Command{
		Use:   "exec <id> [--] <command> [args...]",
		Short: "Run a command in a ready environment's execute service with the kept execute token",
		Long: `Run a command in a ready environment, in the task's execute service. One
argument is run with sh -c (so pipes work: dn env exec ID -- 'id | wc -c');
several are run as a program and its arguments. Output is printed as it
arrives when the server streams it, and dn exits with the command's exit code.

The execute token is the one kept by 'dn env create', or --token. Flags go
before the id.`,
		Example: `  dn env exec 01J... -- wget -qO- http://web:8080/
  dn env exec --timeout-sec 120 01J... -- 'python3 exploit.py > out.txt; cat out.txt'`,
		Args: args(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, command := argv[0], argv[1:]
			if command[0] == "--" {
				command = command[1:]
			}
			if len(command) == 0 {
				return usageErr("no command given after the environment id")
			}
			if err := positive(cmd, "timeout-sec", timeoutSec); err != nil {
				return err
			}
			c, org, ws, err := a.scope()
			if err != nil {
				return err
			}
			if token == "" {
				token, err = a.tokens().Get(config.KindEnvironment, id)
				if errors.Is(err, config.ErrNoToken) {
					return failErr(lostEnvToken(id), "no execute token is kept for environment %s on this machine", id)
				}
				if err != nil {
					return err
				}
			}
			body := client.EnvironmentExec{Command: command}
			if len(command) == 1 {
				body.Command = command[0]
			}
			if timeoutSec > 0 {
				body.TimeoutSec = &timeoutSec
			}
			var collected strings.Builder
			code, note, err := c.ExecEnvironment(cmd.Context(), org, ws, id, token, body, a.execSink(&collected, &collected))
			if s := client.StatusOf(err); s == 401 || s == 403 {
				return failErr(lostEnvToken(id), "the execute token was refused for environment %s: %v", id, err)
			}
			if err != nil {
				return err
			}
			if a.json {
				if err := a.printJSON(map[string]any{"exit_code": code, "output": collected.String(), "note": note}); err != nil {
					return err
				}
			} else if note != "" {
				fmt.Fprintf(a.io.Err, "dn: %s\n", note)
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&token, "token", "", "execute token (default: the one kept at create)")
	cmd.Flags().Int64Var(&timeoutSec, "timeout-sec", 0, "kill the command after this many seconds (server default 60)")
	return cmd
}

// execSink prints output events as they arrive (or, with --json, collects
// them into stdout and stderr).
func (a *app) execSink(stdout, stderr io.Writer) func(client.ExecEvent) error {
	return func(ev client.ExecEvent) error {
		var w io.Writer
		switch ev.Type {
		case apitypes.ProcessEventTypeStdout:
			w = a.io.Out
			if a.json {
				w = stdout
			}
		case apitypes.ProcessEventTypeStderr:
			w = a.io.Err
			if a.json {
				w = stderr
			}
		default:
			return nil
		}
		b, err := ev.Bytes()
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
}
