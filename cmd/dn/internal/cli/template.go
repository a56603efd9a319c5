package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// templateBuildDeadline is how long `template build --wait` waits by
// default: the backend's build timeout (20 minutes) and some.
const templateBuildDeadline = 25 * time.Minute

func (a *app) templateCmd() *cobra.Command {
	return group("template", "The org's sandbox templates: build one from an image and steps, list, delete, read build logs",
		a.templateBuildCmd(), a.templateListCmd(), a.templateRmCmd(), a.templateLogsCmd())
}

const templateBuildLong = `Request a template build: a base (--from-image, an image on the backend's
Docker host, nothing is pulled; or --from-template, one of the org's
templates) and E2B's steps, in order:

  --step 'RUN apt-get install -y curl'   a shell command (as the current USER)
  --step 'ENV KEY=VALUE [KEY=VALUE...]'  environment variables
  --step 'WORKDIR /app'                  the working directory (created)
  --step 'USER name'                     the user of later steps and of sandboxes

Or give the whole request as a file (-f, JSON or YAML; - reads stdin), as
POST /templates takes it (API.md §15):

  name: tools:v1
  fromImage: dreadnode/base:latest
  cpuCount: 2
  memoryMB: 1024
  steps:
    - {type: RUN, args: ["echo hi > /hi.txt"]}
    - {type: ENV, args: [APP_ENV, ci]}
  startCmd: "python3 -m http.server 8000"
  readyCmd: "curl -sf localhost:8000"

Flags given with -f override the file's fields (--step adds steps after the
file's). A name the org already uses gets a new build of that template.

Without --wait the command prints the template and its waiting build. With
--wait it prints the build's log as it comes and exits 0 when the build is
ready, 1 when it fails (its error is printed), 3 when --timeout passes.`

func (a *app) templateBuildCmd() *cobra.Command {
	var file, name, fromImage, fromTemplate, startCmd, readyCmd string
	var steps, tags []string
	var cpu, memoryMB int64
	var force, wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "build [flags]",
		Short: "Build a template from an image (or template) and steps (--wait: print its log until it is ready)",
		Long:  templateBuildLong,
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req client.TemplateBuildRequest
			if file != "" {
				var err error
				if req, err = a.readBuildFile(file); err != nil {
					return err
				}
			}
			f := cmd.Flags()
			set := func(flag string, into *string, v string) {
				if f.Changed(flag) {
					*into = v
				}
			}
			set("name", &req.Name, name)
			set("from-image", &req.FromImage, fromImage)
			set("from-template", &req.FromTemplate, fromTemplate)
			if f.Changed("start-cmd") {
				req.StartCmd = &startCmd
			}
			if f.Changed("ready-cmd") {
				req.ReadyCmd = &readyCmd
			}
			if f.Changed("cpu") {
				req.CPUCount = &cpu
			}
			if f.Changed("memory-mb") {
				req.MemoryMB = &memoryMB
			}
			if f.Changed("tag") {
				req.Tags = tags
			}
			if f.Changed("force") {
				req.Force = force
			}
			for _, s := range steps {
				st, err := parseStep(s)
				if err != nil {
					return err
				}
				req.Steps = append(req.Steps, st)
			}
			if (req.FromImage == "") == (req.FromTemplate == "") {
				return usageErr("give exactly one of --from-image (an image on the backend's Docker host) and --from-template (one of the org's templates), by flag or in the -f file")
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			acc, err := c.BuildTemplate(cmd.Context(), req)
			if err != nil {
				return err
			}
			if !wait {
				if a.json {
					return a.printJSON(acc)
				}
				return a.fields("Template", acc.TemplateID, "Names", strings.Join(acc.Names, ", "), "Tags", strings.Join(acc.Tags, ", "),
					"Build", acc.Build.BuildID, "Status", string(acc.Build.Status),
					"Next", fmt.Sprintf("dn template logs %s --build %s --follow", acc.TemplateID, acc.Build.BuildID))
			}
			b, err := a.followBuild(cmd.Context(), c, acc.TemplateID, acc.Build.BuildID, timeout)
			if err != nil {
				return err
			}
			return a.buildOutcome(acc.TemplateID, b)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "the build request as a JSON or YAML file (- reads stdin)")
	f.StringVar(&name, "name", "", "the template's name, alias[:tag] (an existing name gets a new build)")
	f.StringVar(&fromImage, "from-image", "", "base image, present on the backend's Docker host")
	f.StringVar(&fromTemplate, "from-template", "", "base template, one of the org's (name[:tag] or id)")
	f.StringArrayVar(&steps, "step", nil, "a step: 'RUN cmd', 'ENV K=V ...', 'WORKDIR path', 'USER name' (repeatable, in order)")
	f.StringVar(&startCmd, "start-cmd", "", "command started at the build's end and at each sandbox's start")
	f.StringVar(&readyCmd, "ready-cmd", "", "command retried until it exits 0 after the start command")
	f.Int64Var(&cpu, "cpu", 0, "CPUs: 1 or even, at most 32 (server default 2)")
	f.Int64Var(&memoryMB, "memory-mb", 0, "memory in MiB: even, 128 to 32768 (server default 512)")
	f.StringArrayVar(&tags, "tag", nil, "tag of the build (repeatable; default: the tag default)")
	f.BoolVar(&force, "force", false, "build every step again, without the cache")
	f.BoolVar(&wait, "wait", false, "print the build's log until it ends; exit 1 when it fails")
	f.DurationVar(&timeout, "timeout", templateBuildDeadline, "with --wait: how long to wait (exit 3 after; the build goes on)")
	return cmd
}

// readBuildFile reads a build request from a JSON or YAML file; unknown
// fields are refused, naming them, so a typo is not silently dropped.
func (a *app) readBuildFile(path string) (client.TemplateBuildRequest, error) {
	var req client.TemplateBuildRequest
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(io.LimitReader(a.io.In, 8<<20))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return req, usageErr("reading the build request: %v", err)
	}
	// YAML is a superset of JSON: one parser reads both, then the JSON
	// decoder applies the request's shape strictly.
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return req, usageErr("%s is neither JSON nor YAML: %v", path, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return req, usageErr("%s must hold one object (the build request: name, fromImage, steps, ...)", path)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return req, usageErr("%s: %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, usageErr("%s is not a build request: %v (fields: name, tags, cpuCount, memoryMB, fromImage, fromTemplate, steps, startCmd, readyCmd, force)", path, err)
	}
	return req, nil
}

// parseStep reads a --step: its type, then its arguments as the type takes
// them.
func parseStep(s string) (client.TemplateStep, error) {
	typ, rest, _ := strings.Cut(strings.TrimSpace(s), " ")
	rest = strings.TrimSpace(rest)
	st := client.TemplateStep{Type: strings.ToUpper(typ)}
	switch st.Type {
	case "RUN", "WORKDIR", "USER":
		if rest == "" {
			return st, usageErr("--step %q: %s needs an argument", s, st.Type)
		}
		st.Args = []string{rest}
	case "ENV":
		for _, kv := range strings.Fields(rest) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return st, usageErr("--step %q: ENV takes KEY=VALUE pairs", s)
			}
			st.Args = append(st.Args, k, v)
		}
		if len(st.Args) == 0 {
			return st, usageErr("--step %q: ENV takes KEY=VALUE pairs", s)
		}
	case "COPY":
		return st, usageErr("--step %q: COPY needs its files uploaded (E2B's SDKs do that); use RUN steps here", s)
	default:
		return st, usageErr("--step %q: the type must be RUN, ENV, WORKDIR or USER", s)
	}
	return st, nil
}

// followBuild prints a build's log (to stderr with --json, so stdout stays
// one document) until the build ends, and returns it.
func (a *app) followBuild(ctx context.Context, c *client.Client, templateID, buildID string, timeout time.Duration) (*client.TemplateBuild, error) {
	out := a.io.Out
	if a.json {
		out = a.io.Err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := c.WaitTemplateBuild(wctx, templateID, buildID, 0, 300*time.Millisecond, 2*time.Second, func(e client.TemplateBuildLogEntry) {
		fmt.Fprintln(out, client.LogLine(e))
	})
	if err == nil {
		return b, nil
	}
	status := "waiting"
	if b != nil {
		status = string(b.Status)
	}
	hint := fmt.Sprintf("The build goes on on the server. Follow it: dn template logs %s --build %s --follow", templateID, buildID)
	switch {
	case ctx.Err() != nil:
		return nil, &exitError{code: ExitInterrupted, hint: hint, msg: fmt.Sprintf("interrupted while build %s is %s", buildID, status)}
	case errors.Is(err, context.DeadlineExceeded) || wctx.Err() != nil:
		return nil, &exitError{code: ExitTimeout, hint: hint, msg: fmt.Sprintf("build %s is still %s after %s", buildID, status, elapsed(timeout))}
	}
	return nil, err
}

// buildOutcome prints a finished build; a failed one is exit 1 with its error.
func (a *app) buildOutcome(templateID string, b *client.TemplateBuild) error {
	if a.json {
		b.Logs = nil
		if err := a.printJSON(b); err != nil {
			return err
		}
	} else if string(b.Status) == client.BuildReady {
		if err := a.fields("Template", templateID, "Build", b.BuildID, "Status", string(b.Status),
			"Size", fmt.Sprintf("%d bytes", b.SizeBytes), "Resources", fmt.Sprintf("%d CPU, %d MiB", b.CPUCount, b.MemoryMB)); err != nil {
			return err
		}
	}
	if string(b.Status) == client.BuildError {
		msg := fmt.Sprintf("build %s of template %s failed", b.BuildID, templateID)
		if b.ErrorStep != "" && !strings.HasPrefix(b.Error, "step "+b.ErrorStep) {
			msg += " at step " + client.SafeText(b.ErrorStep)
		}
		return failErr(fmt.Sprintf("Read its log: dn template logs %s --build %s", templateID, b.BuildID), "%s: %s", msg, orDash(client.SafeText(b.Error)))
	}
	return nil
}

func (a *app) templateListCmd() *cobra.Command {
	var kind string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the org's templates and snapshots, newest first",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kind != "" && kind != "build" && kind != "snapshot" {
				return usageErr("--kind must be build or snapshot, got %q", kind)
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			ts, err := c.ListTemplates(cmd.Context(), kind)
			if err != nil {
				return err
			}
			if a.json {
				if ts == nil {
					ts = []client.TemplateInfo{}
				}
				return a.printJSON(ts)
			}
			rows := make([][]string, 0, len(ts))
			for _, t := range ts {
				tags := make([]string, 0, len(t.Tags))
				for _, tg := range t.Tags {
					tags = append(tags, tg.Tag)
				}
				rows = append(rows, []string{t.TemplateID, orDash(strings.Join(t.Names, ",")), string(t.Kind), orDash(t.BuildStatus),
					orDash(strings.Join(tags, ",")), fmt.Sprintf("%d", t.CPUCount), fmt.Sprintf("%d", t.MemoryMB),
					fmt.Sprintf("%d", t.SizeBytes), t.CreatedAt.Format(time.RFC3339)})
			}
			return a.table([]string{"TEMPLATE", "NAME", "KIND", "STATUS", "TAGS", "CPU", "MEMORY_MB", "SIZE_BYTES", "CREATED"}, rows)
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: build or snapshot")
	return cmd
}

func (a *app) templateRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <id-or-name>...",
		Aliases: []string{"delete"},
		Short:   "Delete templates (or snapshots) with their builds' images; running sandboxes keep running",
		Args:    args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := c.DeleteTemplate(cmd.Context(), id); err != nil {
					return fmt.Errorf("deleting template %s: %w", id, err)
				}
				if !a.json {
					fmt.Fprintf(a.io.Out, "Deleted template %s\n", id)
				}
			}
			if a.json {
				return a.printJSON(map[string]any{"deleted": ids})
			}
			return nil
		},
	}
}

func (a *app) templateLogsCmd() *cobra.Command {
	var buildID string
	var follow bool
	var timeout time.Duration
	cmd := idCmd("logs", "Print a template build's log (default: the newest build; --follow: until it ends)", func(cmd *cobra.Command, id string) error {
		c, err := a.api()
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if buildID == "" {
			builds, err := c.ListTemplateBuilds(ctx, id)
			if err != nil {
				return err
			}
			if len(builds) == 0 {
				return failErr("Build it: dn template build --name "+id+" ...", "template %s has no builds", id)
			}
			buildID = builds[0].BuildID
		}
		if follow {
			b, err := a.followBuild(ctx, c, id, buildID, timeout)
			if err != nil {
				return err
			}
			return a.buildOutcome(id, b)
		}
		var entries []client.TemplateBuildLogEntry
		b, _, err := c.BuildLogs(ctx, id, buildID, 0, func(e client.TemplateBuildLogEntry) {
			if a.json {
				entries = append(entries, e)
				return
			}
			fmt.Fprintln(a.io.Out, client.LogLine(e))
		})
		if err != nil {
			return err
		}
		if a.json {
			if entries == nil {
				entries = []client.TemplateBuildLogEntry{}
			}
			return a.printJSON(map[string]any{"templateID": id, "buildID": buildID, "status": b.Status, "error": b.Error, "logs": entries})
		}
		if string(b.Status) == client.BuildError {
			fmt.Fprintf(a.io.Err, "build %s failed: %s\n", buildID, orDash(client.SafeText(b.Error)))
		}
		return nil
	})
	f := cmd.Flags()
	f.StringVar(&buildID, "build", "", "the build's id (default: the newest)")
	f.BoolVar(&follow, "follow", false, "print the log as it comes until the build ends; exit 1 when it fails")
	f.DurationVar(&timeout, "timeout", templateBuildDeadline, "with --follow: how long to wait (exit 3 after)")
	cmd.Use = "logs <id-or-name>"
	return cmd
}
