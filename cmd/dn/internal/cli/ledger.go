package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) ledgerCmd() *cobra.Command {
	return group("ledger", "The sandbox ledger: every compute allocation and what it cost",
		a.ledgerListCmd(), a.ledgerGetCmd(), a.ledgerUsageCmd())
}

func (a *app) ledgerListCmd() *cobra.Command {
	var states, kinds []string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List ledger records (all states unless --state)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, err := a.org()
			if err != nil {
				return err
			}
			list, err := c.ListLedgerEntries(cmd.Context(), org, states, kinds)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			rows := make([][]string, len(list))
			for i, r := range list {
				state := string(r.State)
				if r.KillReason != nil {
					state += " (" + *r.KillReason + ")"
				}
				rows[i] = []string{r.ID, r.SandboxKind, r.Provider, state, stamp(r.CreatedAt),
					fmt.Sprintf("%.1f", r.TotalRuntimeSeconds), r.EstimatedTotalCredits.String()}
			}
			return a.table([]string{"ID", "KIND", "PROVIDER", "STATE", "CREATED", "RUNTIME_S", "CREDITS"}, rows)
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "states to list: starting, running, paused, killed (comma-separated)")
	cmd.Flags().StringSliceVar(&kinds, "kind", nil, "sandbox kinds to list: runtime, task, world")
	return cmd
}

func (a *app) ledgerGetCmd() *cobra.Command {
	return a.scopedCmd("get", "Show one ledger record", func(ctx context.Context, c *client.Client, org, _, id string) error {
		r, err := c.GetLedgerEntry(ctx, org, id)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(r)
		}
		return a.fields("Record", r.ID, "Kind", r.SandboxKind, "Provider", r.Provider, "State", string(r.State),
			"Kill reason", deref(r.KillReason), "Template", r.TemplateID, "Created", stamp(r.CreatedAt),
			"Last started", stampOf(r.LastStartedAt), "Killed", stampOf(r.KilledAt), "Expires", stampOf(r.ExpiresAt),
			"Runtime", fmt.Sprintf("%.1fs", r.TotalRuntimeSeconds), "Billed credits", r.BilledCredits.String(),
			"Running credits", r.RunningCredits.String(), "Estimated credits", r.EstimatedTotalCredits.String(),
			"Environment", r.EnvironmentID, "Runtime id", r.RuntimeID, "Diagnostic", r.Diagnostic)
	})
}

func (a *app) ledgerUsageCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "usage",
		Short: "The org's sandbox usage: total runtime, sessions, this month",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, err := a.org()
			if err != nil {
				return err
			}
			u, err := c.SandboxUsage(cmd.Context(), org)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(u)
			}
			return a.fields("Total runtime", fmt.Sprintf("%.1fs", u.TotalRuntimeSeconds), "Sessions", fmt.Sprint(u.SessionsCount),
				"This month", fmt.Sprintf("%.1fs", u.CurrentMonthSeconds))
		},
	}
}

func (a *app) creditsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "credits",
		Short: "The org's credit balance and burn rate",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, err := a.org()
			if err != nil {
				return err
			}
			b, err := c.Credits(cmd.Context(), org)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(b)
			}
			return a.fields("Organization", b.Organization, "Balance", b.Balance.String(), "Running credits", b.RunningCredits.String(),
				"Estimated balance", b.EstimatedBalance.String(), "Burn rate", fmt.Sprintf("%g credits/s", b.BurnRatePerSecond),
				"Running sandboxes", fmt.Sprint(b.RunningSandboxes))
		},
	}
}

// stamp shows a time as the server sent it (RFC 3339, UTC).
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// stampOf is stamp of an optional time ("" for none).
func stampOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}
