package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) eventsCmd() *cobra.Command {
	return group("events", "Lifecycle events of sandboxes and task environments", a.eventsTailCmd())
}

func (a *app) eventsTailCmd() *cobra.Command {
	var types []string
	var sandboxID, after string
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print the org's lifecycle events as they happen, until interrupted",
		Long: `Print the org's lifecycle events as they happen (GET /events/stream), one line each:
time, type, sandbox, cause. A lost connection is resumed after the last event
printed, so none is missed or printed twice. --after resumes after an event id
printed earlier (within the retention, 7 days by default).`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			print := func(ev client.Event) error {
				if a.json {
					return a.printJSON(ev)
				}
				_, err := fmt.Fprintf(a.io.Out, "%s  %-32s  %s  %s\n", ev.Timestamp.Local().Format(time.RFC3339), ev.Type, ev.SandboxId, ev.Cause)
				return err
			}
			pause := client.Doubling(backoffMin, backoffMax) // between reconnects; reset by progress
			for {
				last, err := c.StreamEvents(ctx, after, types, sandboxID, print)
				if last != after {
					after = last
					pause.Reset()
				}
				if ctx.Err() != nil {
					return nil
				}
				var apiErr *client.APIError
				if errors.As(err, &apiErr) && apiErr.StatusCode < 500 {
					return err // a bad filter or --after: retrying cannot help
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(pause.NextBackOff()):
				}
			}
		},
	}
	cmd.Flags().StringSliceVar(&types, "type", nil, "only these event types (repeatable or comma-separated), e.g. sandbox.lifecycle.killed")
	cmd.Flags().StringVar(&sandboxID, "sandbox", "", "only this sandbox's events")
	cmd.Flags().StringVar(&after, "after", "", "start right after this event id instead of now")
	return cmd
}
