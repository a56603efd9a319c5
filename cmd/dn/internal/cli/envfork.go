package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
	"github.com/dreadnode/terraform-provider-dreadnode/cmd/dn/internal/config"
)

func (a *app) envForkCmd() *cobra.Command {
	var count int
	var timeoutSec int64
	var wait bool
	cmd := &cobra.Command{
		Use:   "fork <id>",
		Short: "Fork a ready or paused environment into --count environments from one checkpoint",
		Long: `Fork a ready (or paused) task environment: every service's filesystem is
committed once, as it is now, and --count environments start from it, each
with its own network, service URLs and execute token (kept, as at create, for
'dn env exec'), without the task's build or its seeding. Memory is not copied:
the services' processes start again from their commands.

Each fork succeeds or fails alone; dn prints one line per fork. With --wait it
then waits for each fork as 'dn env wait' does (deadline --timeout-sec, else
15 minutes); a fork that failed to be made or to become ready exits 1.`,
		Example: `  dn env fork 7h3k2m4q9x2v5p8r1c6d --count 5 --wait`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := positive(cmd, "timeout-sec", timeoutSec); err != nil {
				return err
			}
			if count < 1 || count > 100 {
				return usageErr("--count must be between 1 and 100, not %d", count)
			}
			c, org, ws, err := a.scope()
			if err != nil {
				return err
			}
			start := time.Now()
			forks, err := c.ForkEnvironment(cmd.Context(), org, ws, argv[0], count)
			if err != nil {
				return err
			}
			var made []*client.Environment
			failed := 0
			for i := range forks {
				f := &forks[i]
				if f.Environment == nil {
					failed++
					fmt.Fprintf(a.io.Err, "dn: fork %d of %d failed: %s\n", i+1, len(forks), orDash(f.ErrorText()))
					continue
				}
				if tok := f.Environment.ExecuteToken; tok != "" {
					if _, err := a.tokens().Put(config.KindEnvironment, f.Environment.ID, tok); err != nil {
						fmt.Fprintf(a.io.Err, "dn: warning: could not keep the execute token of %s (%v)\n", f.Environment.ID, err)
					}
				}
				made = append(made, f.Environment)
			}
			if wait {
				deadline, why := waitDeadline(start, timeoutSec)
				for i, e := range made {
					final, err := a.waitEnv(cmd.Context(), c, org, ws, e, start, deadline, why, "")
					if err != nil {
						return err
					}
					final.ExecuteToken = e.ExecuteToken
					made[i] = final
				}
			}
			if a.json {
				out := make([]map[string]any, 0, len(made))
				for _, e := range made {
					out = append(out, envJSON(e))
				}
				if err := a.printJSON(out); err != nil {
					return err
				}
			} else {
				for _, e := range made {
					fmt.Fprintf(a.io.Out, "%s\t%s\n", e.ID, e.State)
				}
			}
			if failed > 0 {
				return failErr("The forks made are listed; retry the others with dn env fork.", "%d of %d forks failed", failed, len(forks))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", 1, "how many environments to make (1-100)")
	f.Int64Var(&timeoutSec, "timeout-sec", 0, "the wait's deadline in seconds (default 15 min)")
	f.BoolVar(&wait, "wait", false, "wait until every fork is ready, printing each state")
	return cmd
}
