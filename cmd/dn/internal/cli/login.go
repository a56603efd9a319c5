package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
	"github.com/dreadnode/terraform-provider-dreadnode/cmd/dn/internal/config"
)

func (a *app) loginCmd() *cobra.Command {
	var noVerify bool
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Save the API URL, key, org and workspace to a profile (mode 0600)",
		Long: `Save the API URL, API key, org and workspace to a profile of the profile file
($XDG_CONFIG_HOME/dreadnode/config.yaml, else ~/.config/dreadnode/config.yaml;
mode 0600). Values come from the flags, else the DREADNODE_* variables, else
the profile already saved. Without a key, dn asks for it on a terminal (not
echoed) or reads one line from stdin. The key and org are checked against the
API first unless --no-verify.`,
		Example: `  dn login --api-url http://127.0.0.1:8080 --org dev
  cat .dreadnode/dev-api-key | dn login --org dev --profile local`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.settings()
			if err != nil {
				return err
			}
			if s.APIKey == "" {
				key, err := a.readKey()
				if err != nil {
					return err
				}
				s.APIKey = key
				s.Source["api_key"] = "prompt"
			}
			if s.Org == "" {
				return usageErr("no organization: pass --org (or set %s)", config.EnvOrg)
			}
			a.set = s
			if !noVerify {
				c, err := client.New(client.Config{BaseURL: s.APIURL, APIKey: s.APIKey, UserAgent: "dn/" + Version, RetryMax: -1})
				if err != nil {
					return failErr("Fix --api-url.", "%s", err)
				}
				if _, err := c.Credits(cmd.Context(), s.Org); err != nil {
					if client.StatusOf(err) == 404 {
						return failErr("The key belongs to another organization, or the org name is wrong: check --org.", "the API does not know organization %q for this key: %v", s.Org, err)
					}
					return err
				}
			}
			name := a.profileName()
			if err := config.Save(a.cfgDir, name, s.Profile); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"profile": name, "path": config.ProfilePath(a.cfgDir), "api_url": s.APIURL, "org": s.Org, "workspace": s.Workspace})
			}
			fmt.Fprintf(a.io.Out, "Logged in to %s as org %q (workspace %q).\nProfile %q saved to %s (mode 0600).\n",
				s.APIURL, s.Org, s.Workspace, name, config.ProfilePath(a.cfgDir))
			return nil
		},
	}
	cmd.Flags().BoolVar(&noVerify, "no-verify", false, "save without checking the key against the API")
	return cmd
}

// readKey asks for the API key on a terminal, else reads a line of stdin.
func (a *app) readKey() (string, error) {
	if f, ok := a.io.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.io.Err, "API key: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.io.Err)
		if err != nil {
			return "", err
		}
		if k := strings.TrimSpace(string(b)); k != "" {
			return k, nil
		}
	} else {
		line, _ := bufio.NewReader(a.io.In).ReadString('\n')
		if k := strings.TrimSpace(line); k != "" {
			return k, nil
		}
	}
	return "", usageErr("no API key: pass --api-key, set %s, or type it when asked", config.EnvAPIKey)
}
