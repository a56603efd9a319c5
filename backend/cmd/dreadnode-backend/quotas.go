package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// quotas sets or shows an org's admission limits (shared/API.md §7) in the
// database; a running backend applies them at its next create or queue pass.
func quotas(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "set" && args[0] != "show") {
		usage()
		return fmt.Errorf("quotas: expected set or show")
	}
	sub := args[0]
	cfg, err := app.ConfigFromEnv()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("quotas "+sub, flag.ContinueOnError)
	org := fs.String("org", "", "organization name")
	run := fs.Int("max-running", -1, "sandboxes the org may hold at once (omit: unlimited)")
	cpu := fs.Int("max-cpu", -1, "CPUs the org may hold at once (omit: unlimited)")
	mem := fs.Int("max-memory-mb", -1, "memory in MB the org may hold at once (omit: unlimited)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "database (DREADNODE_DATABASE_URL)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *org == "" {
		return fmt.Errorf("quotas %s: -org is required", sub)
	}
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := admission.Migrate(ctx, db); err != nil {
		return err
	}
	if sub == "set" {
		var q admission.Quotas
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]*int{"max-running": run, "max-cpu": cpu, "max-memory-mb": mem} {
			if !set[name] {
				continue
			}
			if *v < 0 {
				return fmt.Errorf("quotas set: -%s: must be 0 or more (omit it for unlimited), got %d", name, *v)
			}
			switch name {
			case "max-running":
				q.MaxRunning = v
			case "max-cpu":
				q.MaxCPU = v
			default:
				q.MaxMemoryMB = v
			}
		}
		if err := admission.SetQuotas(ctx, db, *org, q); err != nil {
			return fmt.Errorf("quotas set: organization %q: %w", *org, err)
		}
	}
	if _, err := db.OrgByName(ctx, *org); err != nil {
		return fmt.Errorf("organization %q: %w", *org, err)
	}
	q, err := admission.QuotasOf(ctx, db.Reader(), *org)
	if err != nil {
		return err
	}
	u, err := admission.UseOf(ctx, db.Reader(), *org)
	if err != nil {
		return err
	}
	fmt.Printf("org %s: max_running %s (using %d), max_cpu %s (using %d), max_memory_mb %s (using %d)\n",
		*org, limit(q.MaxRunning), u.Sandboxes, limit(q.MaxCPU), u.CPU, limit(q.MaxMemoryMB), u.MemoryMB)
	return nil
}

func limit(p *int) string {
	if p == nil {
		return "unlimited"
	}
	return fmt.Sprint(*p)
}
