package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) runtimeCmd() *cobra.Command {
	return group("runtime", "Runtimes: named, restartable sandboxes of a workspace",
		a.runtimeCreateCmd(), a.runtimeListCmd(), a.runtimeGetCmd(), a.runtimeStartCmd(),
		a.runtimeActionCmd("pause", "Pause the runtime's sandbox"),
		a.runtimeActionCmd("resume", "Resume the runtime's paused sandbox"),
		a.runtimeActionCmd("reset", "Kill and unlink the runtime's sandbox (the runtime stays, idle)"),
		a.runtimeKeepaliveCmd(), a.runtimeDeleteCmd())
}

func (a *app) printRuntime(rt *client.Runtime) error {
	if a.json {
		return a.printJSON(rt)
	}
	return a.fields("Runtime", rt.ID, "Name", rt.Name, "Template", rt.Template, "State", string(rt.State),
		"Sandbox", deref(rt.SandboxID), "Last sandbox", deref(rt.LastSandboxID), "Timeout", fmt.Sprintf("%ds", rt.TimeoutSec),
		"Metadata", kvList(rt.Metadata))
}

func (a *app) runtimeCreateCmd() *cobra.Command {
	var template string
	var cpu, memoryMB, timeoutSec int64
	var envs, meta []string
	cmd := &cobra.Command{
		Use:   "create <name>",
		Short: "Create an idle runtime (dn runtime start provisions its sandbox)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ev, err := parsePairs("env", envs)
			if err != nil {
				return err
			}
			md, err := parsePairs("metadata", meta)
			if err != nil {
				return err
			}
			body := client.RuntimeCreate{Name: argv[0], Template: template, EnvVars: ev, Metadata: md}
			if cpu > 0 || memoryMB > 0 {
				body.Resources = &client.RuntimeResources{CPUCount: optionalInt(cpu), MemoryMB: optionalInt(memoryMB)}
			}
			body.TimeoutSec = optionalInt(timeoutSec)
			c, org, ws, err := a.scope()
			if err != nil {
				return err
			}
			rt, err := c.CreateRuntime(cmd.Context(), org, ws, body, client.NewIdempotencyKey())
			if err != nil {
				return err
			}
			return a.printRuntime(rt)
		},
	}
	f := cmd.Flags()
	f.StringVar(&template, "template", "", "template of its sandboxes (default base)")
	f.Int64Var(&cpu, "cpu", 0, "CPU count")
	f.Int64Var(&memoryMB, "memory-mb", 0, "memory in MiB")
	f.Int64Var(&timeoutSec, "timeout-sec", 0, "seconds a started sandbox lives without keepalive (server default 600)")
	f.StringArrayVar(&envs, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringArrayVar(&meta, "metadata", nil, "metadata KEY=VALUE (repeatable)")
	return cmd
}

func (a *app) runtimeListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the workspace's runtimes",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, ws, err := a.scope()
			if err != nil {
				return err
			}
			list, err := c.ListRuntimes(cmd.Context(), org, ws)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			rows := make([][]string, len(list))
			for i, rt := range list {
				rows[i] = []string{rt.ID, rt.Name, rt.Template, string(rt.State), orDash(deref(rt.SandboxID))}
			}
			return a.table([]string{"ID", "NAME", "TEMPLATE", "STATE", "SANDBOX"}, rows)
		},
	}
}

func (a *app) runtimeGetCmd() *cobra.Command {
	return a.scopedCmd("get", "Show a runtime", func(ctx context.Context, c *client.Client, org, ws, id string) error {
		rt, err := c.GetRuntime(ctx, org, ws, id)
		if err != nil {
			return err
		}
		return a.printRuntime(rt)
	})
}

func (a *app) runtimeStartCmd() *cobra.Command {
	var timeoutSec int64
	cmd := a.scopedCmd("start", "Provision the runtime's sandbox; its access token is kept for dn sandbox exec/cp",
		func(ctx context.Context, c *client.Client, org, ws, id string) error {
			rt, err := c.StartRuntime(ctx, org, ws, id, timeoutSec)
			if err != nil {
				return err
			}
			kept := ""
			if rt.SandboxID != nil {
				kept = a.keepSandboxToken(*rt.SandboxID, rt.SandboxToken)
			}
			if err := a.printRuntime(rt); err != nil || a.json {
				return err
			}
			if rt.SandboxID != nil {
				a.printAccessToken(rt.SandboxToken, kept, *rt.SandboxID)
			}
			return nil
		})
	cmd.Flags().Int64Var(&timeoutSec, "timeout-sec", 0, "lifetime of this sandbox (default: the runtime's timeout_sec)")
	return cmd
}

func (a *app) runtimeActionCmd(action, short string) *cobra.Command {
	return a.scopedCmd(action, short, func(ctx context.Context, c *client.Client, org, ws, id string) error {
		rt, err := c.RuntimeAction(ctx, org, ws, id, action)
		if err != nil {
			return err
		}
		return a.printRuntime(rt)
	})
}

func (a *app) runtimeKeepaliveCmd() *cobra.Command {
	var extend int64
	cmd := a.scopedCmd("keepalive", "Keep the runtime's sandbox alive at least --extend-sec from now",
		func(ctx context.Context, c *client.Client, org, ws, id string) error {
			k, err := c.KeepaliveRuntime(ctx, org, ws, id, extend)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(k)
			}
			fmt.Fprintf(a.io.Out, "Runtime %s: sandbox %s expires at %s.\n", k.ID, k.SandboxID, orDash(stampOf(k.ExpiresAt)))
			return nil
		})
	cmd.Flags().Int64Var(&extend, "extend-sec", 0, "seconds from now, 60..3600 (server default 300)")
	return cmd
}

func (a *app) runtimeDeleteCmd() *cobra.Command {
	return a.scopedCmd("delete", "Kill the runtime's sandbox and delete the runtime", func(ctx context.Context, c *client.Client, org, ws, id string) error {
		if err := c.DeleteRuntime(ctx, org, ws, id); err != nil {
			return err
		}
		if a.json {
			return a.printJSON(map[string]any{"id": id, "deleted": true})
		}
		fmt.Fprintf(a.io.Out, "Runtime %s deleted.\n", id)
		return nil
	})
}
