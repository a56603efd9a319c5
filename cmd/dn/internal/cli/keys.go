package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) keysCmd() *cobra.Command {
	return group("keys", "The org's API keys: make, list and revoke them",
		a.keysCreateCmd(), a.keysListCmd(), a.keysRevokeCmd())
}

func (a *app) keysCreateCmd() *cobra.Command {
	var scope string
	var expires time.Duration
	cmd := &cobra.Command{
		Use:   "create <name>",
		Short: "Make an API key (its secret is printed once: keep it)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, names []string) error {
			sc := client.APIKeyCreateScope(scope)
			in := client.APIKeyCreate{Name: names[0], Scope: &sc}
			if expires < 0 {
				return usageErr("--expires must be positive, e.g. 720h")
			}
			if expires > 0 {
				at := time.Now().Add(expires).UTC()
				in.ExpiresAt = &at
			}
			c, org, err := a.org()
			if err != nil {
				return err
			}
			k, err := c.CreateAPIKey(cmd.Context(), org, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(k)
			}
			if err := a.fields("Key id", k.Id, "Name", k.Name, "Scope", string(k.Scope), "Expires", when(k.ExpiresAt)); err != nil {
				return err
			}
			fmt.Fprintf(a.io.Out, "API key (shown this once; keep it): %s\n", deref(k.Key))
			return nil
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "full", "full, or read (GET only)")
	cmd.Flags().DurationVar(&expires, "expires", 0, "lifetime, e.g. 720h (default: never expires)")
	return cmd
}

func (a *app) keysListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the org's API keys (never their secrets)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, err := a.org()
			if err != nil {
				return err
			}
			list, err := c.ListAPIKeys(cmd.Context(), org)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			rows := make([][]string, len(list))
			for i, k := range list {
				rows[i] = []string{k.Id, k.Name, k.Prefix, string(k.Scope), k.CreatedAt.Format(time.RFC3339), when(k.LastUsedAt), when(k.ExpiresAt)}
			}
			return a.table([]string{"ID", "NAME", "PREFIX", "SCOPE", "CREATED", "LAST_USED", "EXPIRES"}, rows)
		},
	}
}

func (a *app) keysRevokeCmd() *cobra.Command {
	return idCmd("revoke", "Revoke an API key: every replica refuses it within a second", func(cmd *cobra.Command, id string) error {
		c, org, err := a.org()
		if err != nil {
			return err
		}
		if err := c.RevokeAPIKey(cmd.Context(), org, id); err != nil {
			return err
		}
		fmt.Fprintf(a.io.Out, "revoked %s\n", id)
		return nil
	})
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
