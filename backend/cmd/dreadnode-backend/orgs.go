package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/keys"
)

// orgs creates or lists orgs (shared/API.md §11) in the database.
func orgs(ctx context.Context, args []string) error {
	var credits *float64
	var run, cpu, mem *int
	var fs *flag.FlagSet
	sub, org, db, err := operatorDB(ctx, "orgs", []string{"create", "list"}, args, func(f *flag.FlagSet) {
		fs = f
		credits = f.Float64("credits", 0, "initial credits (create)")
		run = f.Int("max-running", -1, "sandboxes the org may hold at once (omit: unlimited)")
		cpu = f.Int("max-cpu", -1, "CPUs the org may hold at once (omit: unlimited)")
		mem = f.Int("max-memory-mb", -1, "memory in MB the org may hold at once (omit: unlimited)")
	}, func(sub string) bool { return sub == "create" })
	if err != nil {
		return err
	}
	defer db.Close()
	svc := keys.New(db, nil)
	if sub == "create" {
		micro, err := billing.MicroFromCredits(*credits)
		if err != nil && *credits != 0 {
			return fmt.Errorf("orgs create: -credits: %v", err)
		}
		var q admission.Quotas
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "max-running":
				q.MaxRunning = run
			case "max-cpu":
				q.MaxCPU = cpu
			case "max-memory-mb":
				q.MaxMemoryMB = mem
			}
		})
		if _, err := svc.CreateOrg(ctx, keys.OrgSpec{Name: org, CreditsMicro: micro, Quotas: q}); err != nil {
			return fmt.Errorf("orgs create: %w", err)
		}
		fmt.Printf("created org %s; make its first key with: dreadnode-backend keys create -org %s -name NAME\n", org, org)
		return nil
	}
	all, err := svc.Orgs(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORG\tCREDITS\tMAX_RUNNING\tMAX_CPU\tMAX_MEMORY_MB\tCREATED")
	for _, o := range all {
		q, err := svc.Quotas(ctx, o.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, billing.Credits(o.CreditsMicro), limit(q.MaxRunning), limit(q.MaxCPU),
			limit(q.MaxMemoryMB), o.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// keyCommand makes, lists or revokes an org's API keys in the database.
func keyCommand(ctx context.Context, args []string) error {
	var name, scope, id *string
	var expires *time.Duration
	sub, org, db, err := operatorCommand(ctx, "keys", []string{"create", "list", "revoke"}, args, func(f *flag.FlagSet) {
		name = f.String("name", "", "what the key is for (create)")
		scope = f.String("scope", "full", "full or read (create)")
		expires = f.Duration("expires", 0, "lifetime, e.g. 720h (create; omit: never expires)")
		id = f.String("id", "", "the key's id (revoke)")
	})
	if err != nil {
		return err
	}
	defer db.Close()
	svc := keys.New(db, nil)
	switch sub {
	case "create":
		spec := keys.KeySpec{Name: *name, Scope: *scope}
		if *expires != 0 {
			at := time.Now().Add(*expires).UTC()
			spec.ExpiresAt = &at
		}
		k, secret, err := svc.CreateKey(ctx, org, spec)
		if err != nil {
			return fmt.Errorf("keys create: %w", err)
		}
		fmt.Fprintf(os.Stderr, "created key %s (%s, scope %s) for org %s; its secret is shown this once:\n", k.ID, k.Name, k.Scope, org)
		fmt.Println(secret)
		return nil
	case "revoke":
		if *id == "" {
			return fmt.Errorf("keys revoke: -id is required (see keys list)")
		}
		if err := svc.Revoke(ctx, org, *id); err != nil {
			return fmt.Errorf("keys revoke: %w", err)
		}
		fmt.Printf("revoked key %s of org %s\n", *id, org)
		return nil
	}
	all, err := svc.Keys(ctx, org)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tSCOPE\tCREATED\tLAST_USED\tEXPIRES")
	for _, k := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, k.Scope, k.CreatedAt.Format(time.RFC3339), when(k.LastUsedAt), when(k.ExpiresAt))
	}
	return tw.Flush()
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
