// Command dreadnode-backend runs the sandbox backend ("serve", the default)
// and its operator commands ("credits grant", "quotas set", "orgs create",
// "keys create").
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

func main() {
	if filepath.Base(os.Args[0]) == agentName {
		os.Exit(agent.Main(os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args)
	case "credits":
		err = credits(ctx, args)
	case "quotas":
		err = quotas(ctx, args)
	case "orgs":
		err = orgs(ctx, args)
	case "keys":
		err = keyCommand(ctx, args)
	case "help":
		usage()
		return
	default:
		usage()
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dreadnode-backend:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  dreadnode-backend [serve] [-listen ADDR]        run the backend (configured by DREADNODE_* variables)
  dreadnode-backend credits grant -org ORG -amount N   add N credits to ORG's balance (operator action)
  dreadnode-backend credits show -org ORG              print ORG's balance
  dreadnode-backend quotas set -org ORG [-max-running N] [-max-cpu N] [-max-memory-mb N]
                                                       set ORG's limits (an omitted one is unlimited)
  dreadnode-backend quotas show -org ORG               print ORG's limits and current use
  dreadnode-backend orgs create -org ORG [-credits N] [-max-running N] [-max-cpu N] [-max-memory-mb N]
                                                       create an org with its credits and quotas
  dreadnode-backend orgs list                          list the orgs
  dreadnode-backend keys create -org ORG -name NAME [-scope full|read] [-expires DURATION]
                                                       make an API key (its secret is printed once)
  dreadnode-backend keys list -org ORG                 list ORG's keys (never their secrets)
  dreadnode-backend keys revoke -org ORG -id KEY_ID    revoke a key (refused by every replica within 1 s)
`)
}

func serve(ctx context.Context, args []string) error {
	cfg, err := app.ConfigFromEnv()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "listen address (DREADNODE_LISTEN)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "database (DREADNODE_DATABASE_URL)")
	fs.StringVar(&cfg.TasksDir, "tasks-dir", cfg.TasksDir, "task catalog (DREADNODE_TASKS_DIR)")
	fs.StringVar(&cfg.Provider, "provider", cfg.Provider, "docker or e2b (DREADNODE_PROVIDER)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log)
	setMemoryLimit(log)
	if cfg.AgentBinary == "" && usesDocker(cfg) {
		path, how := findAgent()
		if path == "" {
			return fmt.Errorf("no sandbox agent for Docker sandboxes: %s", how)
		}
		log.Info("sandbox agent", "binary", path, "found", how)
		cfg.AgentBinary = path
	}
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx)
}

func credits(ctx context.Context, args []string) error {
	var amount *float64
	sub, org, db, err := operatorCommand(ctx, "credits", []string{"grant", "show"}, args, func(fs *flag.FlagSet) {
		amount = fs.Float64("amount", 0, "credits to add (grant)")
	})
	if err != nil {
		return err
	}
	defer db.Close()
	if sub == "grant" {
		micro, err := billing.MicroFromCredits(*amount)
		if err != nil {
			return fmt.Errorf("credits grant: -amount: %v", err)
		}
		if _, err := db.GrantCreditsMax(ctx, org, micro, billing.MaxBalanceMicro); err != nil {
			return fmt.Errorf("credits grant: %w", err)
		}
	}
	o, err := db.OrgByName(ctx, org)
	if err != nil {
		return fmt.Errorf("organization %q: %w", org, err)
	}
	fmt.Printf("org %s balance: %s credits\n", o.Name, billing.Credits(o.CreditsMicro))
	return nil
}

// operatorCommand parses an operator command "name sub -org ORG ..." (subs
// are its subcommands; flags adds its own) and opens the database named by
// DREADNODE_DATABASE_URL or -database-url.
func operatorCommand(ctx context.Context, name string, subs []string, args []string, flags func(fs *flag.FlagSet)) (sub, org string, db *store.DB, err error) {
	return operatorDB(ctx, name, subs, args, flags, func(string) bool { return true })
}

// operatorDB is operatorCommand for commands whose subcommands need -org
// only when needOrg says so.
func operatorDB(ctx context.Context, name string, subs []string, args []string, flags func(fs *flag.FlagSet), needOrg func(sub string) bool) (sub, org string, db *store.DB, err error) {
	if len(args) == 0 || !slices.Contains(subs, args[0]) {
		usage()
		return "", "", nil, fmt.Errorf("%s: expected %s", name, strings.Join(subs, " or "))
	}
	sub = args[0]
	cfg, err := app.ConfigFromEnv()
	if err != nil {
		return "", "", nil, err
	}
	fs := flag.NewFlagSet(name+" "+sub, flag.ContinueOnError)
	orgFlag := fs.String("org", "", "organization name")
	flags(fs)
	fs.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "database (DREADNODE_DATABASE_URL)")
	if err := fs.Parse(args[1:]); err != nil {
		return "", "", nil, err
	}
	if *orgFlag == "" && needOrg(sub) {
		return "", "", nil, fmt.Errorf("%s %s: -org is required", name, sub)
	}
	db, err = store.Open(ctx, cfg.DatabaseURL)
	return sub, *orgFlag, db, err
}
