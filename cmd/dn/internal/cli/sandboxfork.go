package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/cmd/dn/internal/config"
)

func (a *app) sandboxForkCmd() *cobra.Command {
	var count, timeout int
	var wait bool
	cmd := &cobra.Command{
		Use:   "fork <id>",
		Short: "Fork a running or paused sandbox into --count sandboxes from one checkpoint",
		Long: `Fork a running (or paused) sandbox: its filesystem is committed once, as it
is now, and --count sandboxes start from it, each with its own id and access
token (kept for 'dn sandbox exec'), the parent's template, resources, env,
metadata and network policy. Memory is not copied: each fork's processes start
again from the template's command. Each fork succeeds or fails alone; dn
prints one line per fork and exits 1 when one failed.`,
		Example: `  dn sandbox fork 7h3k2m4q9x2v5p8r1c6d --count 3 --wait`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if count < 1 || count > 100 {
				return usageErr("--count must be between 1 and 100, not %d", count)
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			body := apitypes.ForkSandbox{Count: &count, WaitReady: &wait}
			if timeout > 0 {
				body.Timeout = &timeout
			}
			forks, err := c.ForkSandbox(cmd.Context(), argv[0], body)
			if err != nil {
				return err
			}
			failed := 0
			var out []any
			for i := range forks {
				f := &forks[i]
				if f.Sandbox == nil {
					failed++
					fmt.Fprintf(a.io.Err, "dn: fork %d of %d failed: %s\n", i+1, len(forks), orDash(f.ErrorText()))
					continue
				}
				if tok := f.Sandbox.AccessToken; tok != "" {
					if _, err := a.tokens().Put(config.KindSandbox, f.Sandbox.SandboxID, tok); err != nil {
						fmt.Fprintf(a.io.Err, "dn: warning: could not keep the access token of %s (%v)\n", f.Sandbox.SandboxID, err)
					}
				}
				out = append(out, f.Sandbox)
				if !a.json {
					fmt.Fprintf(a.io.Out, "%s\t%s\n", f.Sandbox.SandboxID, f.Sandbox.State)
				}
			}
			if a.json {
				if err := a.printJSON(out); err != nil {
					return err
				}
			}
			if failed > 0 {
				return failErr("The forks made are listed; retry the others with dn sandbox fork.", "%d of %d forks failed", failed, len(forks))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", 1, "how many sandboxes to make (1-100)")
	f.IntVar(&timeout, "timeout", 0, "each fork's lifetime in seconds (default: the server's)")
	f.BoolVar(&wait, "wait", false, "answer once every fork runs or failed")
	return cmd
}
