// Package cli is the dn command line: its cobra commands, how they print
// (tables for people, --json for scripts) and how they exit.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
	"github.com/dreadnode/terraform-provider-dreadnode/cmd/dn/internal/config"
)

// Exit codes of dn (documented in `dn --help` and docs/cli.md). Commands
// that run a program (env exec, sandbox exec) exit with its exit code.
const (
	ExitOK      = 0
	ExitError   = 1
	ExitUsage   = 2
	ExitTimeout = 3
	// ExitInterrupted: Ctrl-C or SIGTERM (128 + SIGINT, as shells report it).
	ExitInterrupted = 130
)

// Version is set at build time (-ldflags "-X ...cli.Version=v1.2.3").
var Version = "dev"

// IO is where a run reads and writes, and its environment.
type IO struct {
	In     io.Reader
	Out    io.Writer
	Err    io.Writer
	Getenv func(string) string
	// ErrIsTerminal enables the progress line (on stderr).
	ErrIsTerminal bool
}

// StdIO is the process's standard streams and environment (the variables
// dn reads, through config.Env; strings cannot fail to parse).
func StdIO() IO {
	env, _ := config.ReadEnv()
	return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: env.Getenv,
		ErrIsTerminal: term.IsTerminal(int(os.Stderr.Fd()))}
}

// app is the state of one run shared by the commands.
type app struct {
	io      IO
	flags   config.Profile
	profile string
	json    bool
	// started is set once flags and arguments were accepted: an error
	// before it is a usage error (exit 2).
	started bool
	cfgDir  string
	set     config.Settings
	c       *client.Client
}

// exitError carries an exit code and what to tell the user.
type exitError struct {
	code int
	msg  string
	hint string
}

func (e *exitError) Error() string { return e.msg }

// exitCode ends the run with code and no message (a program's exit code).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func usageErr(format string, a ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, a...)}
}

func failErr(hint, format string, a ...any) error {
	return &exitError{code: ExitError, msg: fmt.Sprintf(format, a...), hint: hint}
}

// Main runs dn with args and returns its exit code.
func Main(args []string, stdio IO) int {
	a := &app{io: stdio}
	root := a.rootCmd()
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintf(stdio.Err, "dn: %s\n", ee.msg)
		if ee.hint != "" {
			fmt.Fprintf(stdio.Err, "%s\n", indent(ee.hint, "  "))
		}
		if ee.code == ExitUsage && cmd != nil {
			fmt.Fprintf(stdio.Err, "  Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return ee.code
	}
	if !a.started {
		fmt.Fprintf(stdio.Err, "dn: %s\n", err)
		if cmd != nil {
			fmt.Fprintf(stdio.Err, "  Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return ExitUsage
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stdio.Err, "dn: interrupted\n")
		return ExitInterrupted
	}
	fmt.Fprintf(stdio.Err, "dn: %s\n", err)
	if h := a.hint(err); h != "" {
		fmt.Fprintf(stdio.Err, "%s\n", indent(h, "  "))
	}
	return ExitError
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}

// hint says what to do next after an API or connection error.
func (a *app) hint(err error) string {
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return fmt.Sprintf("Could not reach the API at %s (%s). Start the backend (make run) or point dn at it with --api-url, %s or dn login.",
			a.set.APIURL, a.set.Source["api_url"], config.EnvAPIURL)
	}
	switch client.StatusOf(err) {
	case 401:
		return fmt.Sprintf("The API did not accept the key (from %s). Run dn login, or set %s to a valid API key.", a.set.Source["api_key"], config.EnvAPIKey)
	case 402:
		return "The organization is out of credits; an operator can grant more (dreadnode-backend credits grant)."
	case 404:
		return fmt.Sprintf("Check the id or name (the list commands show them) and the org %q / workspace %q in use: objects of another org or workspace answer 404.", a.set.Org, a.set.Workspace)
	case 429:
		return "The server is busy; try again shortly."
	case 500, 502, 503, 504:
		return "The server or its compute provider failed; try again, and check the backend's log if it persists."
	}
	return ""
}

const rootLong = `dn drives the Dreadnode platform: task environments, sandboxes, templates, runtimes,
the sandbox ledger and credits.

Configuration, highest precedence first: the flags --api-url, --api-key,
--org, --workspace; the variables DREADNODE_API_URL, DREADNODE_API_KEY,
DREADNODE_ORG, DREADNODE_WORKSPACE; the profile written by 'dn login'
($XDG_CONFIG_HOME/dreadnode/config.yaml, else ~/.config/dreadnode/config.yaml;
--profile or DREADNODE_PROFILE picks one, default "default"). The API URL
defaults to http://127.0.0.1:8080 and the workspace to "main".

Secrets the API shows only once (execute tokens of environments, access
tokens of sandboxes) are kept under the same directory in tokens/, mode 0600.

Every read command takes --json for scripts; people get tables.

Exit codes:
  0  success
  1  error (the API's detail and what to do next are printed)
  2  usage error (unknown command or flag, missing or malformed argument)
  3  timeout (a wait passed its deadline; the work goes on server-side)
  130  interrupted (Ctrl-C; what was started goes on server-side)
  env exec and sandbox exec exit with the command's own exit code.`

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "dn",
		Short:         "The Dreadnode command line",
		Long:          rootLong,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.started = true
			return nil
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr("%s", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.APIURL, "api-url", "", "API URL (default "+config.DefaultAPIURL+"; env "+config.EnvAPIURL+")")
	pf.StringVar(&a.flags.APIKey, "api-key", "", "API key (env "+config.EnvAPIKey+")")
	pf.StringVar(&a.flags.Org, "org", "", "organization (env "+config.EnvOrg+")")
	pf.StringVar(&a.flags.Workspace, "workspace", "", "workspace (default "+config.DefaultWorkspace+"; env "+config.EnvWorkspace+")")
	pf.StringVar(&a.profile, "profile", "", "profile of the profile file (default \"default\"; env "+config.EnvProfile+")")
	pf.BoolVar(&a.json, "json", false, "print JSON for scripts instead of text for people")
	root.AddCommand(a.loginCmd(), a.envCmd(), a.sandboxCmd(), a.taskCmd(), a.runtimeCmd(), a.worldCmd(), a.ledgerCmd(), a.creditsCmd(), a.keysCmd(),
		a.eventsCmd(), a.volumeCmd(), a.snapshotCmd(), a.templateCmd())
	root.SetIn(a.io.In)
	root.SetOut(a.io.Out)
	root.SetErr(a.io.Err)
	// After SetOut: the completion command captures the writer here.
	root.InitDefaultCompletionCmd()
	return root
}

// Root returns the command tree (for generating docs).
func Root() *cobra.Command {
	a := &app{io: IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard, Getenv: func(string) string { return "" }}}
	return a.rootCmd()
}

// group is a command holding subcommands; an unknown subcommand is a usage error.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	c.AddCommand(subs...)
	return c
}

// args wraps a positional-argument check so its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageErr("%s", err)
		}
		return nil
	}
}

// settings resolves the run's settings once.
func (a *app) settings() (config.Settings, error) {
	if a.set.Source != nil {
		return a.set, nil
	}
	dir, err := config.Dir(a.io.Getenv)
	if err != nil {
		return a.set, err
	}
	a.cfgDir = dir
	name := a.profileName()
	if err := config.CheckProfileName(name); err != nil {
		return a.set, usageErr("%s", err)
	}
	prof, _, err := config.Load(dir, name)
	if err != nil {
		return a.set, err
	}
	a.set = config.Resolve(a.flags, a.io.Getenv, prof)
	return a.set, nil
}

func (a *app) profileName() string {
	switch {
	case a.profile != "":
		return a.profile
	case a.io.Getenv(config.EnvProfile) != "":
		return a.io.Getenv(config.EnvProfile)
	}
	return config.DefaultProfile
}

func (a *app) tokens() config.Tokens {
	if a.cfgDir == "" {
		_, _ = a.settings()
	}
	return config.Tokens{Dir: a.cfgDir}
}

// api returns the API client, or says which setting is missing.
func (a *app) api() (*client.Client, error) {
	if a.c != nil {
		return a.c, nil
	}
	s, err := a.settings()
	if err != nil {
		return nil, err
	}
	if s.APIKey == "" {
		return nil, failErr(fmt.Sprintf("Run dn login, or set %s (or --api-key).", config.EnvAPIKey), "no API key is configured")
	}
	c, err := client.New(client.Config{BaseURL: s.APIURL, APIKey: s.APIKey, UserAgent: "dn/" + Version,
		RetryMax: 2, RetryWaitMin: 300 * time.Millisecond, RetryWaitMax: 2 * time.Second, Timeout: 90 * time.Second})
	if err != nil {
		return nil, failErr(fmt.Sprintf("Fix --api-url, %s or the profile (from %s).", config.EnvAPIURL, s.Source["api_url"]), "%s", err)
	}
	a.c = c
	return c, nil
}

// org returns the client and the org, which the org-scoped routes need.
func (a *app) org() (*client.Client, string, error) {
	c, err := a.api()
	if err != nil {
		return nil, "", err
	}
	if a.set.Org == "" {
		return nil, "", failErr(fmt.Sprintf("Run dn login --org ORG, or set %s (or --org).", config.EnvOrg), "no organization is configured")
	}
	return c, a.set.Org, nil
}

// scope returns the client, org and workspace.
func (a *app) scope() (*client.Client, string, string, error) {
	c, org, err := a.org()
	return c, org, a.set.Workspace, err
}

// idCmd is a command whose one argument is an id.
func idCmd(use, short string, run func(cmd *cobra.Command, id string) error) *cobra.Command {
	return &cobra.Command{Use: use + " <id>", Short: short, Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error { return run(cmd, argv[0]) }}
}

// scopedCmd is an idCmd that talks to the API in the run's org and workspace.
func (a *app) scopedCmd(use, short string, run func(ctx context.Context, c *client.Client, org, ws, id string) error) *cobra.Command {
	return idCmd(use, short, func(cmd *cobra.Command, id string) error {
		c, org, ws, err := a.scope()
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, org, ws, id)
	})
}

// clientCmd is an idCmd that talks to the API (routes scoped by the key).
func (a *app) clientCmd(use, short string, run func(ctx context.Context, c *client.Client, id string) error) *cobra.Command {
	return idCmd(use, short, func(cmd *cobra.Command, id string) error {
		c, err := a.api()
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, id)
	})
}
