package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) sandboxSnapshotCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "snapshot <id>",
		Short: "Snapshot a running or paused sandbox's filesystem into a template of the org",
		Long: `Snapshot a running (or paused) sandbox: its filesystem (image and writable
layer) is committed to a new template of the org, which sandboxes start from
(dn sandbox create --template <snapshot id>). The sandbox is paused only while
the engine commits and keeps running. Memory and processes are not kept: a
sandbox started from the snapshot runs its command again.

--name alias[:tag] names it; a name the org's snapshots already use makes a
new build of that snapshot (its tag moves to it). dn answers once the
snapshot is made.`,
		Example: `  dn sandbox snapshot 7h3k2m4q9x2v5p8r1c6d --name prepared:v1
  dn sandbox create --template prepared:v1 --wait`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			sn, err := c.CreateSnapshot(cmd.Context(), argv[0], client.SnapshotCreate{Name: name})
			if err != nil {
				if client.IsConflict(err) {
					return failErr(fmt.Sprintf("Check the sandbox's state (dn sandbox get %s): it is snapshotted once it runs or is paused, one snapshot at a time.", argv[0]), "%s", err)
				}
				return err
			}
			if a.json {
				return a.printJSON(sn)
			}
			return a.printSnapshot(sn)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "alias[:tag] of the snapshot (default: unnamed, started from by its template id)")
	return cmd
}

func (a *app) printSnapshot(sn *client.Snapshot) error {
	if err := a.fields("Snapshot", sn.SnapshotID, "Template", sn.TemplateID, "Build", sn.BuildID, "Names", strings.Join(sn.Names, ", "),
		"Size", fmt.Sprintf("%d bytes", sn.SizeBytes), "Parent", sn.Parent, "Sandbox", sn.SourceSandboxID,
		"Created", sn.CreatedAt.UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	fmt.Fprintf(a.io.Out, "Start a sandbox from it: dn sandbox create --template %s\n", sn.SnapshotID)
	return nil
}

func (a *app) snapshotCmd() *cobra.Command {
	return group("snapshot", "The org's snapshots (taken with 'dn sandbox snapshot'): list and delete them",
		a.snapshotListCmd(), a.snapshotDeleteCmd())
}

func (a *app) snapshotListCmd() *cobra.Command {
	var sandboxID, name string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the org's snapshots, newest first, with their size and parent",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			list, err := c.ListSnapshots(cmd.Context(), client.SnapshotFilter{SandboxID: sandboxID, Name: name})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			rows := make([][]string, len(list))
			for i, sn := range list {
				rows[i] = []string{sn.SnapshotID, sn.TemplateID, fmt.Sprint(sn.SizeBytes), orDash(sn.Parent), orDash(sn.SourceSandboxID),
					sn.CreatedAt.UTC().Format(time.RFC3339)}
			}
			return a.table([]string{"SNAPSHOT", "TEMPLATE", "SIZE_BYTES", "PARENT", "SANDBOX", "CREATED"}, rows)
		},
	}
	cmd.Flags().StringVar(&sandboxID, "sandbox", "", "only the snapshots of this sandbox")
	cmd.Flags().StringVar(&name, "name", "", "only the snapshot of this name or template id (with :tag, that tag's build)")
	return cmd
}

func (a *app) snapshotDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete <template id or name>",
		Aliases: []string{"rm"},
		Short:   "Delete a snapshot: its template, every build of it and their images",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			// Resolved first, so a name of a template that is not a
			// snapshot is refused here instead of deleting that template.
			sn, err := c.GetSnapshot(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if err := c.DeleteSnapshot(cmd.Context(), sn.TemplateID); err != nil {
				return err
			}
			fmt.Fprintf(a.io.Out, "deleted snapshot %s (template %s)\n", sn.SnapshotID, sn.TemplateID)
			return nil
		},
	}
}
