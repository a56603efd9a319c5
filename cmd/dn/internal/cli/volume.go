package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) volumeCmd() *cobra.Command {
	return group("volume", "The org's volumes: create, list and delete them (sandboxes mount them with 'dn sandbox create --volume')",
		a.volumeCreateCmd(), a.volumeListCmd(), a.volumeDeleteCmd())
}

func (a *app) volumeCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create <name>",
		Short: "Make a volume of the org, persistent until deleted",
		Long: `Make a named volume of the org: persistent until deleted, mountable by several
of the org's sandboxes at once (dn sandbox create --volume NAME:/path). The
name is unique in the org: 1 to 64 letters, digits, '_' and '-'.`,
		Example: `  dn volume create datasets
  dn sandbox create --volume datasets:/data --wait`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			v, err := c.CreateVolume(cmd.Context(), client.VolumeCreate{Name: argv[0]})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(v)
			}
			return a.printVolume(v)
		},
	}
}

func (a *app) printVolume(v *client.Volume) error {
	return a.fields("Volume", v.VolumeID, "Name", v.Name, "Created", v.CreatedAt.UTC().Format(time.RFC3339),
		"Size", volumeSize(v))
}

// volumeSize is a volume's size as last measured, or "-" before the first
// measurement.
func volumeSize(v *client.Volume) string {
	if v.SizeMeasuredAt == nil {
		return "-"
	}
	return fmt.Sprintf("%d bytes (measured %s)", v.SizeBytes, v.SizeMeasuredAt.UTC().Format(time.RFC3339))
}

func (a *app) volumeListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the org's volumes, oldest first",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			list, err := c.ListVolumes(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			rows := make([][]string, len(list))
			for i := range list {
				v := &list[i]
				size := "-"
				if v.SizeMeasuredAt != nil {
					size = fmt.Sprint(v.SizeBytes)
				}
				rows[i] = []string{v.VolumeID, v.Name, size, v.CreatedAt.UTC().Format(time.RFC3339)}
			}
			return a.table([]string{"ID", "NAME", "SIZE_BYTES", "CREATED"}, rows)
		},
	}
}

func (a *app) volumeDeleteCmd() *cobra.Command {
	cmd := a.clientCmd("delete", "Delete a volume and its contents (by id or name); refused while a sandbox mounts it",
		func(ctx context.Context, c *client.Client, ref string) error {
			v, err := c.FindVolume(ctx, ref)
			if err != nil {
				return err
			}
			if err := c.DeleteVolume(ctx, v.VolumeID); err != nil {
				if client.IsConflict(err) {
					return failErr("Delete the sandboxes that mount it (dn sandbox delete <id>) or wait until they end, then delete the volume again.",
						"%s", err)
				}
				return err
			}
			fmt.Fprintf(a.io.Out, "deleted volume %s (%s)\n", v.VolumeID, v.Name)
			return nil
		})
	cmd.Aliases = []string{"rm"}
	cmd.Use = "delete <id or name>"
	return cmd
}

// parseVolumeMounts reads --volume NAME:PATH[:ro] flags: mounts of the
// org's volumes.
func parseVolumeMounts(vals []string) ([]client.VolumeMount, error) {
	var out []client.VolumeMount
	for _, v := range vals {
		name, rest, ok := strings.Cut(v, ":")
		if !ok || name == "" || !strings.HasPrefix(rest, "/") {
			return nil, usageErr("--volume %q: want NAME:/path (or NAME:/path:ro), NAME a volume of the org (dn volume list)", v)
		}
		m := client.VolumeMount{Name: name, Path: rest, Shared: true}
		if p, ok := strings.CutSuffix(rest, ":ro"); ok {
			m.Path, m.ReadOnly = p, true
		}
		out = append(out, m)
	}
	return out, nil
}
