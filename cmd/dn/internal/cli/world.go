package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) worldCmd() *cobra.Command {
	return group("world", "Worlds jobs: a command run to its end in a sandbox, its output files kept",
		a.worldRunCmd(), a.worldStatusCmd(), a.worldListCmd(), a.worldLogsCmd(), a.worldOutputCmd(), a.worldStopCmd())
}

// worldEnded lists the states a job ends in.
var worldEnded = []string{"completed", "failed", "terminated"}

func (a *app) printWorldJob(j *client.WorldJob) error {
	if a.json {
		return a.printJSON(j)
	}
	exit, output := "-", "-"
	if j.ExitCode != nil {
		exit = fmt.Sprint(*j.ExitCode)
	}
	if j.Output != nil {
		output = fmt.Sprintf("%d files, %d bytes", j.Output.Files, j.Output.Bytes)
		if j.Output.Truncated {
			output += " (truncated)"
		}
	}
	return a.fields("Job", j.Id, "State", string(j.State), "Template", j.TemplateID, "Command", strings.Join(j.Command, " "),
		"Exit code", exit, "Output dir", j.OutputDir, "Output", output, "Diagnostic", orDash(deref(j.Diagnostic)))
}

func (a *app) worldRunCmd() *cobra.Command {
	var template, outputDir, saveTo string
	var cpu, memoryMB, timeoutSec int64
	var envs, meta []string
	var wait bool
	cmd := &cobra.Command{
		Use:   "run [flags] -- <command> [args...]",
		Short: "Start a Worlds job (--wait: until it ends; --save: then download its output as a tar)",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ev, err := parsePairs("env", envs)
			if err != nil {
				return err
			}
			md, err := parsePairs("metadata", meta)
			if err != nil {
				return err
			}
			body := client.WorldJobCreate{Command: argv, CpuCount: optionalInt(cpu), MemoryMB: optionalInt(memoryMB), Timeout: optionalInt(timeoutSec)}
			if template != "" {
				body.Template = &template
			}
			if outputDir != "" {
				body.OutputDir = &outputDir
			}
			if len(ev) > 0 {
				body.EnvVars = &ev
			}
			if len(md) > 0 {
				body.Metadata = &md
			}
			c, org, err := a.org()
			if err != nil {
				return err
			}
			j, err := c.StartWorldJob(cmd.Context(), org, body, client.NewIdempotencyKey())
			if err != nil {
				return err
			}
			if !wait && saveTo == "" {
				return a.printWorldJob(j)
			}
			if j, err = a.waitWorldJob(cmd.Context(), c, org, j); err != nil {
				return err
			}
			if saveTo != "" {
				if err := a.saveWorldOutput(cmd.Context(), c, org, j.Id, saveTo); err != nil {
					return err
				}
				// The download waited for the output to be kept; the job
				// now shows what was.
				if j, err = c.GetWorldJob(cmd.Context(), org, j.Id); err != nil {
					return err
				}
			}
			if err := a.printWorldJob(j); err != nil {
				return err
			}
			if j.State != "completed" {
				return failErr(fmt.Sprintf("Read its output: dn world logs %s", j.Id), "world job %s ended %s: %s", j.Id, j.State, orDash(deref(j.Diagnostic)))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&template, "template", "", "template the job runs (default base)")
	f.StringVar(&outputDir, "output-dir", "", "directory whose files are kept when the job ends (default /output)")
	f.StringVar(&saveTo, "save", "", "after the job ended, write its output tar to this file (implies --wait)")
	f.BoolVar(&wait, "wait", false, "wait until the job ends; exit non-zero unless it completed")
	f.Int64Var(&cpu, "cpu", 0, "CPU count")
	f.Int64Var(&memoryMB, "memory-mb", 0, "memory in MiB")
	f.Int64Var(&timeoutSec, "timeout-sec", 0, "seconds the job may run (server default 3600)")
	f.StringArrayVar(&envs, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringArrayVar(&meta, "metadata", nil, "metadata KEY=VALUE (repeatable)")
	return cmd
}

// waitWorldJob polls a job until it ended, printing its states.
func (a *app) waitWorldJob(ctx context.Context, c *client.Client, org string, j *client.WorldJob) (*client.WorldJob, error) {
	out := a.io.Out
	if a.json {
		out = a.io.Err // stdout stays one JSON document
	}
	start := time.Now()
	p := a.newProgress(start)
	defer p.stop()
	last := j
	w := &waiter{start: start, deadline: start.Add(DefaultWaitDeadline + time.Duration(j.Timeout)*time.Second), out: out, p: p, what: "world job " + j.Id}
	state, err := w.run(ctx, string(j.State), func(s string) bool { return slices.Contains(worldEnded, s) },
		func(ctx context.Context, _ string, _ time.Duration) (string, error) {
			cur, err := c.GetWorldJob(ctx, org, j.Id)
			if err != nil {
				return "", err
			}
			last = cur
			return string(cur.State), nil
		})
	hint := fmt.Sprintf("It keeps going on the server. Check it: dn world status %s\nStop it: dn world stop %s", j.Id, j.Id)
	var de *errDeadline
	switch {
	case errors.As(err, &de):
		return nil, &exitError{code: ExitTimeout, hint: hint, msg: fmt.Sprintf("world job %s is still %s after %s", j.Id, state, elapsed(time.Since(start)))}
	case errors.Is(err, errInterrupted):
		return nil, &exitError{code: ExitInterrupted, hint: hint, msg: fmt.Sprintf("interrupted while world job %s is %s", j.Id, state)}
	}
	return last, err
}

func (a *app) saveWorldOutput(ctx context.Context, c *client.Client, org, id, to string) error {
	b, truncated, err := c.WorldJobOutput(ctx, org, id)
	if err != nil {
		return err
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		return failErr("Choose another path with --save.", "writing the output of world job %s: %v", id, err)
	}
	if truncated {
		fmt.Fprintf(a.io.Err, "the output of world job %s was cut at the server's bounds (64 MiB, 10,000 entries): some files are missing\n", id)
	}
	return nil
}

func (a *app) worldStatusCmd() *cobra.Command {
	return a.worldIDCmd("status", "Show a Worlds job", func(ctx context.Context, c *client.Client, org, id string) error {
		j, err := c.GetWorldJob(ctx, org, id)
		if err != nil {
			return err
		}
		return a.printWorldJob(j)
	})
}

func (a *app) worldStopCmd() *cobra.Command {
	return a.worldIDCmd("stop", "Stop a Worlds job (it ends terminated; its output is kept)", func(ctx context.Context, c *client.Client, org, id string) error {
		j, err := c.StopWorldJob(ctx, org, id)
		if err != nil {
			return err
		}
		return a.printWorldJob(j)
	})
}

func (a *app) worldLogsCmd() *cobra.Command {
	return a.worldIDCmd("logs", "Print a Worlds job's main-process output", func(ctx context.Context, c *client.Client, org, id string) error {
		lines, err := c.WorldJobLogs(ctx, org, id)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(map[string]any{"jobID": id, "lines": lines})
		}
		for _, l := range lines {
			fmt.Fprintln(a.io.Out, l)
		}
		return nil
	})
}

func (a *app) worldOutputCmd() *cobra.Command {
	var to string
	cmd := a.worldIDCmd("output", "Download the tar of a Worlds job's output files (after it ended)", func(ctx context.Context, c *client.Client, org, id string) error {
		if to == "" {
			to = id + "-output.tar"
		}
		if err := a.saveWorldOutput(ctx, c, org, id, to); err != nil {
			return err
		}
		fmt.Fprintln(a.io.Out, to)
		return nil
	})
	cmd.Flags().StringVarP(&to, "output", "o", "", "file to write (default <id>-output.tar)")
	return cmd
}

func (a *app) worldListCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the org's Worlds jobs, newest first",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, err := a.org()
			if err != nil {
				return err
			}
			jobs, err := c.ListWorldJobs(cmd.Context(), org, limit)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(jobs)
			}
			rows := make([][]string, 0, len(jobs))
			for _, j := range jobs {
				rows = append(rows, []string{j.Id, string(j.State), j.TemplateID, strings.Join(j.Command, " "), j.CreatedAt.Format(time.RFC3339)})
			}
			return a.table([]string{"JOB", "STATE", "TEMPLATE", "COMMAND", "CREATED"}, rows)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many jobs")
	return cmd
}

// worldIDCmd is a command on one job of the configured org.
func (a *app) worldIDCmd(use, short string, run func(ctx context.Context, c *client.Client, org, id string) error) *cobra.Command {
	return idCmd(use, short, func(cmd *cobra.Command, id string) error {
		c, org, err := a.org()
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, org, id)
	})
}
