package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
	"github.com/dreadnode/terraform-provider-dreadnode/cmd/dn/internal/config"
)

func (a *app) sandboxCmd() *cobra.Command {
	return group("sandbox", "Sandboxes: create, list, get, exec, cp, logs, pause, connect, delete",
		a.sandboxCreateCmd(), a.sandboxListCmd(), a.sandboxGetCmd(), a.sandboxExecCmd(), a.sandboxCpCmd(),
		a.sandboxLogsCmd(), a.sandboxPauseCmd(), a.sandboxConnectCmd(), a.sandboxDeleteCmd(), a.sandboxForkCmd(),
		a.sandboxSnapshotCmd())
}

// sandboxFinal: states a wait stops at.
func sandboxFinal(s string) bool { return s != client.SandboxStarting }

func (a *app) keepSandboxToken(id, token string) string {
	if token == "" {
		return ""
	}
	p, err := a.tokens().Put(config.KindSandbox, id, token)
	if err != nil {
		fmt.Fprintf(a.io.Err, "dn: warning: could not keep the access token (%v); save it now, it is not shown again\n", err)
		return ""
	}
	return p
}

func (a *app) printAccessToken(token, kept, id string) {
	a.printSecret("Access token", token, kept, fmt.Sprintf("'dn sandbox exec %s -- <command>' and 'dn sandbox cp' use it", id))
}

func (a *app) sandboxCreateCmd() *cobra.Command {
	var template, command string
	var timeout, cpu, memoryMB int64
	var envs, meta, volumes []string
	var autoPause, wait bool
	var waitTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox (its access token is kept for exec and cp)",
		Example: `  dn sandbox create --wait
  dn sandbox create --template base --timeout 600 --env DEBUG=1 --metadata team=red --wait
  dn sandbox create --template prepared:v1 --volume datasets:/data --wait`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ev, err := parsePairs("env", envs)
			if err != nil {
				return err
			}
			md, err := parsePairs("metadata", meta)
			if err != nil {
				return err
			}
			mounts, err := parseVolumeMounts(volumes)
			if err != nil {
				return err
			}
			body := client.SandboxCreate{TemplateID: template, EnvVars: ev, Metadata: md, VolumeMounts: mounts}
			if command != "" {
				body.Command = []string{"sh", "-c", command}
			}
			if cmd.Flags().Changed("timeout") {
				t := int(timeout)
				body.Timeout = &t
			}
			if cpu > 0 || memoryMB > 0 {
				body.Resources = &client.SandboxResources{CPUCount: optionalInt(cpu), MemoryMB: optionalInt(memoryMB)}
			}
			if autoPause {
				body.AutoPause = &autoPause
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			start := time.Now()
			sb, err := c.CreateSandbox(cmd.Context(), body, client.NewIdempotencyKey())
			if err != nil {
				return err
			}
			token := sb.AccessToken
			kept := a.keepSandboxToken(sb.SandboxID, token)
			if wait && !sandboxFinal(sb.State) {
				if sb, err = a.waitSandbox(cmd.Context(), c, sb, start, waitTimeout); err != nil {
					return err
				}
				sb.AccessToken = token
			}
			if a.json {
				return a.printJSON(sandboxJSON(sb))
			}
			a.printSandbox(sb)
			a.printAccessToken(token, kept, sb.SandboxID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&template, "template", "", "template id or name[:tag], a snapshot's included (default base)")
	f.StringArrayVar(&volumes, "volume", nil, "mount the org's volume NAME at /path: NAME:/path[:ro] (repeatable; dn volume create)")
	f.Int64Var(&timeout, "timeout", 0, "lifetime in seconds (server default 300)")
	f.StringArrayVar(&envs, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringArrayVar(&meta, "metadata", nil, "metadata KEY=VALUE (repeatable)")
	f.Int64Var(&cpu, "cpu", 0, "CPU count")
	f.Int64Var(&memoryMB, "memory-mb", 0, "memory in MiB")
	f.StringVar(&command, "command", "", "main process, run with sh -c; the sandbox completes when it exits")
	f.BoolVar(&autoPause, "auto-pause", false, "pause instead of delete at the timeout")
	f.BoolVar(&wait, "wait", false, "wait until the sandbox runs, printing each state")
	f.DurationVar(&waitTimeout, "wait-timeout", DefaultWaitDeadline, "deadline of --wait")
	return cmd
}

func (a *app) waitSandbox(ctx context.Context, c *client.Client, sb *client.Sandbox, start time.Time, limit time.Duration) (*client.Sandbox, error) {
	out := a.io.Out
	if a.json {
		out = a.io.Err
	}
	p := a.newProgress(start)
	defer p.stop()
	last := sb
	w := &waiter{start: start, deadline: start.Add(limit), out: out, p: p, what: "sandbox " + sb.SandboxID}
	state, err := w.run(ctx, sb.State, sandboxFinal, func(ctx context.Context, _ string, _ time.Duration) (string, error) {
		cur, err := c.GetSandbox(ctx, sb.SandboxID)
		if err != nil {
			return "", err
		}
		last = cur
		return cur.State, nil
	})
	hint := fmt.Sprintf("It keeps starting on the server. Check it: dn sandbox get %s\nGive up: dn sandbox delete %s", sb.SandboxID, sb.SandboxID)
	var de *errDeadline
	if errors.As(err, &de) {
		return nil, &exitError{code: ExitTimeout, hint: hint, msg: fmt.Sprintf("sandbox %s is still %s after %s", sb.SandboxID, state, elapsed(time.Since(start)))}
	}
	if errors.Is(err, errInterrupted) {
		return nil, &exitError{code: ExitInterrupted, hint: hint, msg: fmt.Sprintf("interrupted while sandbox %s is %s", sb.SandboxID, state)}
	}
	if err != nil {
		return nil, err
	}
	if state == client.SandboxFailed {
		return nil, failErr(fmt.Sprintf("See its output: dn sandbox logs %s", sb.SandboxID), "sandbox %s failed: %s", sb.SandboxID, orDash(last.DiagnosticText()))
	}
	return last, nil
}

func (a *app) printSandbox(sb *client.Sandbox) {
	_ = a.fields("Sandbox", sb.SandboxID, "Template", sb.TemplateID, "State", sb.State, "Started", client.TimeText(sb.StartedAt),
		"Ends", client.TimeText(sb.EndAt), "Metadata", kvList(sb.Metadata), "Diagnostic", sb.DiagnosticText())
	if len(sb.ServiceURLs) > 0 {
		fmt.Fprintln(a.io.Out, "Service URLs:")
		printEndpoints(a.io.Out, sb.ServiceURLs)
	}
}

func (a *app) sandboxListCmd() *cobra.Command {
	var states, meta []string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List sandboxes (starting, running and paused unless --state)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			md, err := parsePairs("metadata", meta)
			if err != nil {
				return err
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			list, err := c.ListSandboxes(cmd.Context(), states, md)
			if err != nil {
				return err
			}
			if a.json {
				out := make([]map[string]any, len(list))
				for i := range list {
					out[i] = sandboxJSON(&list[i])
				}
				return a.printJSON(out)
			}
			rows := make([][]string, len(list))
			for i, sb := range list {
				rows[i] = []string{sb.SandboxID, sb.TemplateID, sb.State, orDash(client.TimeText(sb.StartedAt)), orDash(client.TimeText(sb.EndAt)), orDash(kvList(sb.Metadata))}
			}
			return a.table([]string{"ID", "TEMPLATE", "STATE", "STARTED", "ENDS", "METADATA"}, rows)
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "states to list (starting, running, paused, completed, failed, deleted)")
	cmd.Flags().StringArrayVar(&meta, "metadata", nil, "only sandboxes with metadata KEY=VALUE (repeatable)")
	return cmd
}

func (a *app) sandboxGetCmd() *cobra.Command {
	return a.clientCmd("get", "Show a sandbox", func(ctx context.Context, c *client.Client, id string) error {
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(sandboxJSON(sb))
		}
		a.printSandbox(sb)
		return nil
	})
}

func lostSandboxToken(id string) string {
	return fmt.Sprintf("The access token is shown only by create and connect. Get a fresh one (it is kept for you):\n  dn sandbox connect %s\nor pass one with --token.", id)
}

// accessToken is --token, else the kept token of the sandbox.
func (a *app) accessToken(flag, id string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	tok, err := a.tokens().Get(config.KindSandbox, id)
	if errors.Is(err, config.ErrNoToken) {
		return "", failErr(lostSandboxToken(id), "no access token is kept for sandbox %s on this machine", id)
	}
	return tok, err
}

func tokenRefused(id string, err error) error {
	if s := client.StatusOf(err); s == 401 || s == 403 {
		return failErr(lostSandboxToken(id), "the access token was refused for sandbox %s: %v", id, err)
	}
	return err
}

func (a *app) sandboxExecCmd() *cobra.Command {
	var token, cwd string
	var envs []string
	var timeoutMs int64
	cmd := &cobra.Command{
		Use:   "exec <id> [--] <program> [args...]",
		Short: "Run a command in a running sandbox, streaming its output; exits with its exit code",
		Long: `Run a program in a running sandbox with the kept access token (or --token).
stdout and stderr are printed as the server streams them (NDJSON events), or
at the end when it answers with one JSON document. dn exits with the
program's exit code. Flags go before the id.`,
		Example: `  dn sandbox exec 01J... -- sh -c 'echo hi; ls /'`,
		Args:    args(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, command := argv[0], argv[1:]
			if command[0] == "--" {
				command = command[1:]
			}
			if len(command) == 0 {
				return usageErr("no command given after the sandbox id")
			}
			ev, err := parsePairs("env", envs)
			if err != nil {
				return err
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			tok, err := a.accessToken(token, id)
			if err != nil {
				return err
			}
			body := client.SandboxExec{Cmd: command, Env: ev, Cwd: cwd}
			body.TimeoutMs = optionalInt(timeoutMs)
			var stdout, stderr strings.Builder
			code, err := c.ExecSandbox(cmd.Context(), id, tok, body, a.execSink(&stdout, &stderr))
			if err != nil {
				return tokenRefused(id, err)
			}
			if a.json {
				if err := a.printJSON(map[string]any{"exitCode": code, "stdout": stdout.String(), "stderr": stderr.String()}); err != nil {
					return err
				}
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&token, "token", "", "access token (default: the kept one)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (absolute)")
	cmd.Flags().StringArrayVar(&envs, "env", nil, "environment variable KEY=VALUE (repeatable)")
	cmd.Flags().Int64Var(&timeoutMs, "timeout-ms", 0, "kill the program after this many milliseconds (server default 60000)")
	return cmd
}

// remotePath splits "ID:/abs/path"; ok is false for a local path.
func remotePath(s string) (id, path string, ok bool) {
	id, path, ok = strings.Cut(s, ":")
	if !ok || id == "" || strings.ContainsAny(id, `/\`) || !strings.HasPrefix(path, "/") {
		return "", "", false
	}
	return id, path, true
}

func (a *app) sandboxCpCmd() *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "cp <src> <dst>",
		Short: "Copy one file into or out of a running sandbox (ID:/abs/path; - is stdin/stdout)",
		Example: `  dn sandbox cp ./exploit.py 01J...:/root/exploit.py
  dn sandbox cp 01J...:/etc/os-release -
  dn sandbox cp 01J...:/root/out.txt ./out.txt`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			srcID, srcPath, srcRemote := remotePath(argv[0])
			dstID, dstPath, dstRemote := remotePath(argv[1])
			if srcRemote == dstRemote {
				return usageErr("exactly one of <src> and <dst> must be a sandbox path ID:/absolute/path")
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			if dstRemote {
				tok, err := a.accessToken(token, dstID)
				if err != nil {
					return err
				}
				r := a.io.In
				if argv[0] != "-" {
					f, err := os.Open(argv[0])
					if err != nil {
						return failErr("", "%v", err)
					}
					defer f.Close()
					r = f
				}
				return tokenRefused(dstID, c.WriteSandboxFile(cmd.Context(), dstID, tok, dstPath, r))
			}
			tok, err := a.accessToken(token, srcID)
			if err != nil {
				return err
			}
			if argv[1] == "-" {
				_, err := c.ReadSandboxFile(cmd.Context(), srcID, tok, srcPath, a.io.Out)
				return tokenRefused(srcID, err)
			}
			dst := argv[1]
			if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
				dst = filepath.Join(dst, filepath.Base(srcPath))
			}
			tmp, err := os.CreateTemp(filepath.Dir(dst), ".dn-cp-*")
			if err != nil {
				return failErr("Copy into an existing directory.", "cannot write %s: %v", dst, err)
			}
			defer os.Remove(tmp.Name())
			if _, err := c.ReadSandboxFile(cmd.Context(), srcID, tok, srcPath, tmp); err != nil {
				tmp.Close()
				return tokenRefused(srcID, err)
			}
			if err := tmp.Close(); err != nil {
				return err
			}
			_ = os.Chmod(tmp.Name(), 0o644)
			return os.Rename(tmp.Name(), dst)
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "access token (default: the kept one)")
	return cmd
}

func (a *app) sandboxLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs <id>",
		Short: "Print a sandbox's startup and main-process output (-f: follow until it ends)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			id := argv[0]
			lines, err := c.SandboxLogs(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.json && !follow {
				return a.printJSON(map[string]any{"sandboxID": id, "lines": lines})
			}
			printed := 0
			emit := func() {
				for ; printed < len(lines); printed++ {
					if a.json {
						_ = a.printJSON(map[string]string{"line": lines[printed]})
					} else {
						fmt.Fprintln(a.io.Out, lines[printed])
					}
				}
			}
			emit()
			pause := client.Doubling(backoffMin, backoffMax/2) // between polls; reset by new lines
			for follow {
				sb, err := c.GetSandbox(cmd.Context(), id)
				if err != nil {
					return err
				}
				gone := client.SandboxGone(sb.State)
				if !gone {
					select {
					case <-cmd.Context().Done():
						return nil
					case <-time.After(pause.NextBackOff()):
					}
				}
				if lines, err = c.SandboxLogs(cmd.Context(), id); err != nil {
					return err
				}
				if len(lines) > printed {
					pause.Reset()
				}
				emit()
				if gone {
					return nil
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the sandbox ends")
	return cmd
}

func (a *app) sandboxPauseCmd() *cobra.Command {
	return a.clientCmd("pause", "Pause a running sandbox (resume it with connect)", func(ctx context.Context, c *client.Client, id string) error {
		if err := c.PauseSandbox(ctx, id); err != nil {
			return err
		}
		return a.showSandboxState(ctx, c, id)
	})
}

func (a *app) showSandboxState(ctx context.Context, c *client.Client, id string) error {
	sb, err := c.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(sandboxJSON(sb))
	}
	fmt.Fprintf(a.io.Out, "Sandbox %s is %s.\n", sb.SandboxID, sb.State)
	return nil
}

func (a *app) sandboxConnectCmd() *cobra.Command {
	var timeout int64
	cmd := a.clientCmd("connect", "Resume a paused sandbox, extend its timeout and keep a fresh access token",
		func(ctx context.Context, c *client.Client, id string) error {
			sb, err := c.ConnectSandbox(ctx, id, timeout)
			if err != nil {
				return err
			}
			kept := a.keepSandboxToken(sb.SandboxID, sb.AccessToken)
			if a.json {
				return a.printJSON(sandboxJSON(sb))
			}
			a.printSandbox(sb)
			a.printAccessToken(sb.AccessToken, kept, sb.SandboxID)
			return nil
		})
	cmd.Flags().Int64Var(&timeout, "timeout", 300, "seconds the sandbox lives from now, at least")
	return cmd
}

func (a *app) sandboxDeleteCmd() *cobra.Command {
	return a.clientCmd("delete", "Delete a sandbox (and forget its kept access token)", func(ctx context.Context, c *client.Client, id string) error {
		if err := c.DeleteSandbox(ctx, id); err != nil {
			return err
		}
		_ = a.tokens().Delete(config.KindSandbox, id)
		return a.showSandboxState(ctx, c, id)
	})
}
