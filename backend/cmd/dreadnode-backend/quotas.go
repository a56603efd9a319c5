package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
)

// quotas sets or shows an org's admission limits (shared/API.md §7) in the
// database; a running backend applies them at its next create or queue pass.
func quotas(ctx context.Context, args []string) error {
	var run, cpu, mem *int
	var fs *flag.FlagSet
	sub, org, db, err := operatorCommand(ctx, "quotas", []string{"set", "show"}, args, func(f *flag.FlagSet) {
		fs = f
		run = f.Int("max-running", -1, "sandboxes the org may hold at once (omit: unlimited)")
		cpu = f.Int("max-cpu", -1, "CPUs the org may hold at once (omit: unlimited)")
		mem = f.Int("max-memory-mb", -1, "memory in MB the org may hold at once (omit: unlimited)")
	})
	if err != nil {
		return err
	}
	defer db.Close()
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
		if err := admission.SetQuotas(ctx, db, org, q); err != nil {
			return fmt.Errorf("quotas set: organization %q: %w", org, err)
		}
	}
	if _, err := db.OrgByName(ctx, org); err != nil {
		return fmt.Errorf("organization %q: %w", org, err)
	}
	q, err := admission.QuotasOf(ctx, db.Reader(), org)
	if err != nil {
		return err
	}
	u, err := admission.UseOf(ctx, db.Reader(), org)
	if err != nil {
		return err
	}
	fmt.Printf("org %s: max_running %s (using %d), max_cpu %s (using %d), max_memory_mb %s (using %d)\n",
		org, limit(q.MaxRunning), u.Sandboxes, limit(q.MaxCPU), u.CPU, limit(q.MaxMemoryMB), u.MemoryMB)
	return nil
}

func limit(p *int) string {
	if p == nil {
		return "unlimited"
	}
	return fmt.Sprint(*p)
}
