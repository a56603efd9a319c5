package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// Default timeouts of dreadnode_template: a build may take as long as the
// backend's build timeout (20 minutes by default).
const (
	templateDefaultCreateTimeout = 25 * time.Minute
	templateDefaultUpdateTimeout = 25 * time.Minute
	templateDefaultDeleteTimeout = 5 * time.Minute
	templateDefaultReadTimeout   = 1 * time.Minute

	// templateLogTail is how many of a failed build's last log lines the
	// error diagnostic shows.
	templateLogTail = 30
)

// Poll intervals of a build: builds take seconds to minutes, their log is
// read at each poll.
var (
	buildPollInitial = 250 * time.Millisecond
	buildPollMax     = 2 * time.Second
)

// The backend's rules for names, tags and resources (API.md §15;
// backend/templates CheckResources and names.go), checked at plan.
var (
	templateNamePattern = regexp.MustCompile(`^[a-z0-9_-]+(:[a-z0-9_.-]+)?$`)
	templateTagPattern  = regexp.MustCompile(`^[a-z0-9_.-]+$`)
)

var (
	_ resource.Resource                   = (*templateResource)(nil)
	_ resource.ResourceWithConfigure      = (*templateResource)(nil)
	_ resource.ResourceWithImportState    = (*templateResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*templateResource)(nil)
	_ resource.ResourceWithValidateConfig = (*templateResource)(nil)
	_ resource.ResourceWithIdentity       = (*templateResource)(nil)
)

// NewTemplateResource returns the dreadnode_template resource.
func NewTemplateResource() resource.Resource { return &templateResource{} }

type templateResource struct {
	data *providerData
}

type templateModel struct {
	ID           types.String   `tfsdk:"id"`
	Name         types.String   `tfsdk:"name"`
	FromImage    types.String   `tfsdk:"from_image"`
	FromTemplate types.String   `tfsdk:"from_template"`
	Steps        types.List     `tfsdk:"steps"`
	StartCmd     types.String   `tfsdk:"start_cmd"`
	ReadyCmd     types.String   `tfsdk:"ready_cmd"`
	CPUCount     types.Int64    `tfsdk:"cpu_count"`
	MemoryMB     types.Int64    `tfsdk:"memory_mb"`
	Tags         types.List     `tfsdk:"tags"`
	Force        types.Bool     `tfsdk:"force"`
	BuildID      types.String   `tfsdk:"build_id"`
	BuildStatus  types.String   `tfsdk:"build_status"`
	SizeBytes    types.Int64    `tfsdk:"size_bytes"`
	Timeouts     timeouts.Value `tfsdk:"timeouts"`
}

type templateStepModel struct {
	Type  types.String `tfsdk:"type"`
	Args  types.List   `tfsdk:"args"`
	Force types.Bool   `tfsdk:"force"`
}

// buildInputs are the attributes a build is made from: a change to any of
// them is a new build of the same template.
// notReported are the build inputs the API does not report (an import
// leaves them null).
var notReported = map[string]bool{"from_image": true, "from_template": true, "steps": true, "tags": true, "force": true}

var buildInputs = []string{"from_image", "from_template", "steps", "start_cmd", "ready_cmd", "cpu_count", "memory_mb", "tags", "force"}

func (r *templateResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template"
}

func (r *templateResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A sandbox template of the org, built by the backend from a local image (or another of the org's " +
			"templates) and E2B's build steps. Sandboxes start from it with `template = dreadnode_template.x.id` " +
			"(or its `name`).\n\n" +
			"Creating it requests a build and waits until the build is `ready`; the template's `id` is saved to the state " +
			"before the wait, so a build that fails (or a wait that times out) leaves the resource in the state, tainted: " +
			"the next apply replaces it and `terraform destroy` deletes it. A failed build is an error showing the build's " +
			"`error` and the last lines of its log.\n\n" +
			"**Changes.** Changing any build input (`from_image`, `from_template`, `steps`, `start_cmd`, `ready_cmd`, " +
			"`cpu_count`, `memory_mb`, `tags`, `force`) is an in-place update that requests a **new build of the same " +
			"template** (found by its `name`) and waits for it: the `id` and `name` stay, so sandboxes and configurations naming the template keep " +
			"working, and steps that did not change come from the build cache. When that build fails, the update is an error " +
			"and the state keeps the previous inputs with `build_status = \"error\"`; a template whose last build failed is " +
			"built again by the next apply, whatever the configuration (its default tag points at the failed build). Changing `name` replaces the " +
			"template, and so does any change to a template without a `name` (the API rebuilds a template by its name). Tags a previous build had stay on it (the API never moves a tag back).\n\n" +
			"A template deleted outside Terraform is removed from the state (the next plan creates it again). Import takes " +
			"the template's id (or, with Terraform 1.12, its identity). The API does not report a build's base, steps or " +
			"tags: the first apply after an import adopts them from the configuration without a build (make sure they are " +
			"the template's); `name`, `cpu_count`, `memory_mb`, `start_cmd` and `ready_cmd` are read from the API.\n\n" +
			"`COPY` steps are not supported by this resource (their files are uploaded through E2B's SDK routes); use " +
			"`RUN` steps, or build such templates with an E2B SDK.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The template's id (sandboxes' `template`).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The template's name: `alias[:tag]` (lowercase letters, digits, `-` and `_`; a tag adds " +
					"`.`). A name the org already uses gets a new build of that template. Changing it replaces the template.",
				Optional:      true,
				PlanModifiers: []planmodifier.String{replaceUnlessAdopting()},
				Validators: []validator.String{stringvalidator.RegexMatches(templateNamePattern,
					"must be alias[:tag]: lowercase letters, digits, '-' and '_', optionally followed by ':tag' (a tag may also hold '.')")},
			},
			"from_image": schema.StringAttribute{
				MarkdownDescription: "The base image: one present on the backend's Docker host (nothing is pulled), e.g. " +
					"`dreadnode/base:latest`. Exactly one of `from_image` and `from_template`.",
				Optional: true,
				Validators: []validator.String{
					stringvalidator.LengthAtLeast(1),
					stringvalidator.ExactlyOneOf(path.MatchRoot("from_image"), path.MatchRoot("from_template")),
				},
			},
			"from_template": schema.StringAttribute{
				MarkdownDescription: "The base template: one of the org's templates, `name[:tag]` or id (its ready build's " +
					"image; its start and ready commands are inherited unless `start_cmd`/`ready_cmd` are set).",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"steps": schema.ListNestedAttribute{
				MarkdownDescription: "The build steps, in order (E2B's): `RUN` `[cmd]` or `[cmd, user]`; `ENV` `[key, value, …]`; " +
					"`WORKDIR` `[path]`; `USER` `[user]`. Each step's result is cached: a step that did not change (nor any " +
					"before it) is not run again unless `force` is set.",
				Optional: true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"type": schema.StringAttribute{
							MarkdownDescription: "`RUN`, `ENV`, `WORKDIR` or `USER`.",
							Required:            true,
							Validators:          []validator.String{templateStepTypeValidator{}},
						},
						"args": schema.ListAttribute{
							MarkdownDescription: "The step's arguments.",
							ElementType:         types.StringType,
							Optional:            true,
						},
						"force": schema.BoolAttribute{
							MarkdownDescription: "Run this step (and every later one) again, without the cache.",
							Optional:            true,
						},
					},
				},
			},
			"start_cmd": schema.StringAttribute{
				MarkdownDescription: "Command started in the background at the end of the build and at each sandbox's start. " +
					"Unset: inherited from `from_template` (none for `from_image`).",
				Optional: true,
			},
			"ready_cmd": schema.StringAttribute{
				MarkdownDescription: "Command retried until it exits 0 after `start_cmd` (at the build's end and at each " +
					"sandbox's start). Unset: inherited from `from_template`.",
				Optional: true,
			},
			"cpu_count": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("CPUs of the build's steps and the default of sandboxes started from it: 1 or an "+
					"even number, at most %d. The server's default (2) when unset.", apitypes.TemplateBuildRequestCPUCountMaximum),
				Optional:      true,
				Computed:      true,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
				Validators:    []validator.Int64{templateCPUValidator{}},
			},
			"memory_mb": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("Memory in MiB of the build's steps and the default of sandboxes started from it: "+
					"an even number from %d to %d. The server's default (512) when unset.",
					apitypes.TemplateBuildRequestMemoryMBMinimum, apitypes.TemplateBuildRequestMemoryMBMaximum),
				Optional:      true,
				Computed:      true,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
				Validators:    []validator.Int64{templateMemoryValidator{}},
			},
			"tags": schema.ListAttribute{
				MarkdownDescription: "Tags given to the build (`name:tag` then names it). Unset: the tag `default`, which " +
					"`template = id` or `name` starts from.",
				ElementType: types.StringType,
				Optional:    true,
				Validators: []validator.List{listvalidator.ValueStringsAre(stringvalidator.RegexMatches(templateTagPattern,
					"must be lowercase letters, digits, '-', '_' and '.'"))},
			},
			"force": schema.BoolAttribute{
				MarkdownDescription: "Build every step again, without the cache. Default `false`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(false),
			},
			"build_id": schema.StringAttribute{
				MarkdownDescription: "The id of the template's build made by the last apply.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"build_status": schema.StringAttribute{
				MarkdownDescription: "That build's status: `waiting`, `building`, `ready` or `error`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"size_bytes": schema.Int64Attribute{
				MarkdownDescription: "The size of that build's image in bytes (shared layers included).",
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Read: true, Update: true, Delete: true}),
		},
	}
}

func (r *templateResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig refuses what the API would refuse and the schema cannot
// say alone: a step's args it needs.
func (r *templateResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m templateModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Steps.IsNull() || m.Steps.IsUnknown() {
		return
	}
	var steps []templateStepModel
	resp.Diagnostics.Append(m.Steps.ElementsAs(ctx, &steps, false)...)
	for i, st := range steps {
		if st.Type.IsUnknown() || st.Args.IsUnknown() {
			continue
		}
		n := len(st.Args.Elements())
		p := path.Root("steps").AtListIndex(i).AtName("args")
		switch strings.ToUpper(st.Type.ValueString()) {
		case "RUN":
			if n < 1 || n > 2 {
				resp.Diagnostics.AddAttributeError(p, "Invalid RUN step", fmt.Sprintf("Attribute %s: a RUN step takes [cmd] or [cmd, user].", p))
			}
		case "ENV":
			if n == 0 || n%2 != 0 {
				resp.Diagnostics.AddAttributeError(p, "Invalid ENV step", fmt.Sprintf("Attribute %s: an ENV step takes pairs: [key, value, key, value, …].", p))
			}
		case "WORKDIR", "USER":
			if n != 1 {
				resp.Diagnostics.AddAttributeError(p, "Invalid "+st.Type.ValueString()+" step", fmt.Sprintf("Attribute %s: a %s step takes one argument.", p, st.Type.ValueString()))
			}
		}
	}
}

// request is the build request the model asks for.
func (m *templateModel) request(ctx context.Context, diags *diag.Diagnostics) client.TemplateBuildRequest {
	in := client.TemplateBuildRequest{
		Name:         m.Name.ValueString(),
		FromImage:    m.FromImage.ValueString(),
		FromTemplate: m.FromTemplate.ValueString(),
		Tags:         stringList(ctx, m.Tags, diags),
		Force:        m.Force.ValueBool(),
	}
	if !m.CPUCount.IsNull() && !m.CPUCount.IsUnknown() {
		v := m.CPUCount.ValueInt64()
		in.CPUCount = &v
	}
	if !m.MemoryMB.IsNull() && !m.MemoryMB.IsUnknown() {
		v := m.MemoryMB.ValueInt64()
		in.MemoryMB = &v
	}
	if !m.StartCmd.IsNull() {
		v := m.StartCmd.ValueString()
		in.StartCmd = &v
	}
	if !m.ReadyCmd.IsNull() {
		v := m.ReadyCmd.ValueString()
		in.ReadyCmd = &v
	}
	if !m.Steps.IsNull() {
		var steps []templateStepModel
		diags.Append(m.Steps.ElementsAs(ctx, &steps, false)...)
		for _, st := range steps {
			in.Steps = append(in.Steps, client.TemplateStep{
				Type:  strings.ToUpper(st.Type.ValueString()),
				Args:  stringList(ctx, st.Args, diags),
				Force: st.Force.ValueBool(),
			})
		}
	}
	return in
}

// applyBuild copies a build's outcome into the model.
func (m *templateModel) applyBuild(b *client.TemplateBuild) {
	m.BuildID = types.StringValue(b.BuildID)
	m.BuildStatus = types.StringValue(string(b.Status))
	m.SizeBytes = types.Int64Value(b.SizeBytes)
	m.CPUCount = types.Int64Value(b.CPUCount)
	m.MemoryMB = types.Int64Value(b.MemoryMB)
}

// buildFailure is a build that ended in error, with the tail of its log.
type buildFailure struct {
	build *client.TemplateBuild
	tail  []string
}

func (f *buildFailure) Error() string {
	b := f.build
	msg := fmt.Sprintf("template build %s of template %s failed", b.BuildID, b.TemplateID)
	if b.ErrorStep != "" && !strings.HasPrefix(b.Error, "step "+b.ErrorStep) {
		msg += " at step " + client.SafeText(b.ErrorStep)
	}
	reason := client.SafeText(b.Error)
	if reason == "" {
		reason = "the server gave no error"
	}
	msg += ": " + reason
	if len(f.tail) > 0 {
		msg += fmt.Sprintf("\n\nLast %d lines of the build's log:\n%s", len(f.tail), strings.Join(f.tail, "\n"))
	}
	return msg
}

// waitBuild waits for a build to be ready, keeping the last lines of its
// log; a build that ends in error is a *buildFailure.
func waitBuild(ctx context.Context, c *client.Client, templateID, buildID string) (*client.TemplateBuild, error) {
	var tail []string
	keep := func(e client.TemplateBuildLogEntry) {
		tail = append(tail, client.LogLine(e))
		if len(tail) > templateLogTail {
			tail = tail[len(tail)-templateLogTail:]
		}
	}
	b, err := c.WaitTemplateBuild(ctx, templateID, buildID, 0, buildPollInitial, buildPollMax, keep)
	switch {
	case err != nil && ctx.Err() != nil:
		status := "unknown"
		if b != nil {
			status = string(b.Status)
		}
		return b, fmt.Errorf("timed out waiting for template build %s to finish (last status %q); the build goes on server-side", buildID, status)
	case err != nil:
		return b, fmt.Errorf("waiting for template build %s: %w", buildID, err)
	case string(b.Status) == client.BuildError:
		return b, &buildFailure{build: b, tail: tail}
	}
	return b, nil
}

func (r *templateResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan templateModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	createTimeout, d := plan.Timeouts.Create(ctx, templateDefaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	in := plan.request(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()

	acc, err := r.data.client.BuildTemplate(ctx, in)
	if err != nil {
		apiErrorAt(&resp.Diagnostics, "Error requesting template build", err, templateFields)
		return
	}
	tflog.Info(ctx, "requested template build", map[string]any{"id": acc.TemplateID, "build": acc.Build.BuildID})

	// Save the id before waiting: a failed or timed-out build leaves a
	// tainted resource that destroy can still delete.
	plan.ID = types.StringValue(acc.TemplateID)
	plan.applyBuild(&acc.Build)
	setIDIdentity(ctx, resp.Identity, acc.TemplateID, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}

	b, err := waitBuild(ctx, r.data.client, acc.TemplateID, acc.Build.BuildID)
	if b != nil {
		plan.applyBuild(b)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
	if err != nil {
		resp.Diagnostics.AddError("Template build failed", err.Error()+
			"\n\nThe template is kept in state as tainted: the next apply replaces it, and terraform destroy deletes it.")
	}
}

func (r *templateResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state templateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	readTimeout, d := state.Timeouts.Read(ctx, templateDefaultReadTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()

	id := state.ID.ValueString()
	// The framework wants the identity even when the resource is removed.
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	var b *client.TemplateBuild
	var err error
	if buildID := state.BuildID.ValueString(); buildID != "" {
		b, err = r.data.client.GetTemplateBuild(ctx, id, buildID, 0)
	} else { // imported: the newest build
		var builds []client.TemplateBuild
		builds, err = r.data.client.ListTemplateBuilds(ctx, id)
		if err == nil && len(builds) > 0 {
			b = &builds[0]
		}
	}
	switch {
	case client.IsNotFound(err):
		resp.Diagnostics.AddWarning("Template no longer exists",
			fmt.Sprintf("Template %s (or its build %s) was not found; it is removed from the state and the next plan creates it again.", id, state.BuildID.ValueString()))
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		apiError(&resp.Diagnostics, "Error reading template", err)
		return
	}
	if b != nil {
		b.Logs = nil
		state.applyBuild(b)
		if b.TemplateID != "" {
			state.ID = types.StringValue(b.TemplateID)
		}
	}
	if isImported(ctx, req.Private) && state.Name.IsNull() {
		// The name is not part of a build; the list has it.
		if t, err := r.data.client.FindTemplate(ctx, id); err == nil && len(t.Names) > 0 {
			state.Name = types.StringValue(t.Names[0])
		}
		if b != nil && state.StartCmd.IsNull() && b.StartCmd != "" {
			state.StartCmd = types.StringValue(b.StartCmd)
		}
		if b != nil && state.ReadyCmd.IsNull() && b.ReadyCmd != "" {
			state.ReadyCmd = types.StringValue(b.ReadyCmd)
		}
	}
	if state.Force.IsNull() {
		state.Force = types.BoolValue(false)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update requests a new build of the same template with the new inputs and
// waits for it. When it fails, the state keeps the previous inputs (and
// records the failed build), so the next apply tries again.
func (r *templateResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state templateModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	updateTimeout, d := plan.Timeouts.Update(ctx, templateDefaultUpdateTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	plan.ID = state.ID
	// The first apply after an import has adopted the configuration.
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, nil)...)

	if !plan.BuildID.IsUnknown() { // no build input changed (timeouts only)
		setIDIdentity(ctx, resp.Identity, plan.ID.ValueString(), &resp.Diagnostics)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	in := plan.request(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	// A new build of this template, by its name (ModifyPlan replaces a
	// template without one instead).
	in.Name = plan.Name.ValueString()
	acc, err := r.data.client.BuildTemplate(ctx, in)
	if err != nil {
		apiErrorAt(&resp.Diagnostics, "Error requesting template build", err, templateFields)
		return
	}
	if acc.TemplateID != state.ID.ValueString() {
		resp.Diagnostics.AddWarning("Template build went to another template",
			fmt.Sprintf("The build was made on template %s, not %s (was %s deleted?). The state follows the new template.", acc.TemplateID, state.ID.ValueString(), state.ID.ValueString()))
		plan.ID = types.StringValue(acc.TemplateID)
	}
	b, err := waitBuild(ctx, r.data.client, acc.TemplateID, acc.Build.BuildID)
	if err != nil {
		// Keep the previous inputs so the next plan asks for the build again.
		if b != nil {
			state.applyBuild(b)
		}
		state.ID = plan.ID
		setIDIdentity(ctx, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		resp.Diagnostics.AddError("Template build failed", err.Error()+
			"\n\nThe state keeps the template's previous arguments, and the next apply requests a build again (until one is ready, "+
			"sandboxes cannot start from the template's default tag, which points at the failed build).")
		return
	}
	plan.applyBuild(b)
	setIDIdentity(ctx, resp.Identity, plan.ID.ValueString(), &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *templateResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state templateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	deleteTimeout, d := state.Timeouts.Delete(ctx, templateDefaultDeleteTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	if err := r.data.client.DeleteTemplate(ctx, state.ID.ValueString()); err != nil && !client.IsNotFound(err) {
		apiError(&resp.Diagnostics, "Error deleting template", err)
	}
}

func (r *templateResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, []byte(`true`))...)
}

func (r *templateResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = idIdentitySchema("The template's id.")
}

// ModifyPlan marks the build's outcome unknown when a build input changes:
// the update then requests a new build.
func (r *templateResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var plan, state templateModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var changed []path.Path
	imported := isImported(ctx, req.Private)
	for _, name := range buildInputs {
		var pv, sv attr.Value
		resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root(name), &pv)...)
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root(name), &sv)...)
		// cpu_count and memory_mb left out of the configuration keep the
		// state's (computed) values: not a change.
		if pv == nil || (pv.IsUnknown() && (name == "cpu_count" || name == "memory_mb")) {
			continue
		}
		// Right after an import, what the API does not report (the base,
		// the steps, the tags) is null in the state: the configuration's
		// value is adopted, not built again.
		if imported && sv != nil && sv.IsNull() && notReported[name] {
			continue
		}
		if pv.IsUnknown() || !pv.Equal(sv) {
			changed = append(changed, path.Root(name))
		}
	}
	// A template whose last build failed (a failed update, or a build
	// requested outside Terraform) is built again even when the
	// configuration matches the state: its default tag points at the
	// failed build, so sandboxes cannot start from it.
	if state.BuildStatus.ValueString() == client.BuildError {
		changed = append(changed, path.Root("build_status"))
	}
	if len(changed) == 0 {
		return
	}
	if plan.Name.IsNull() {
		// The API rebuilds an existing template only by its name: a
		// template without one is replaced.
		resp.RequiresReplace.Append(changed...)
	}
	plan.BuildID = types.StringUnknown()
	plan.BuildStatus = types.StringUnknown()
	plan.SizeBytes = types.Int64Unknown()
	if plan.CPUCount.Equal(state.CPUCount) {
		var cfg types.Int64
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("cpu_count"), &cfg)...)
		if cfg.IsNull() {
			plan.CPUCount = types.Int64Unknown()
		}
	}
	if plan.MemoryMB.Equal(state.MemoryMB) {
		var cfg types.Int64
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("memory_mb"), &cfg)...)
		if cfg.IsNull() {
			plan.MemoryMB = types.Int64Unknown()
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// templateFields are the fields of POST /templates.
var templateFields = fieldPaths{
	"name":         "name",
	"tags":         "tags[]",
	"cpuCount":     "cpu_count",
	"memoryMB":     "memory_mb",
	"fromImage":    "from_image",
	"fromTemplate": "from_template",
	"steps":        "steps[]",
	"startCmd":     "start_cmd",
	"readyCmd":     "ready_cmd",
}

// ---------------------------------------------------------------------------
// Plan-time checks with the backend's rules and words.

// templateStepTypeValidator accepts RUN, ENV, WORKDIR and USER; COPY is
// refused with what to do instead.
type templateStepTypeValidator struct{}

func (templateStepTypeValidator) Description(context.Context) string {
	return "one of RUN, ENV, WORKDIR, USER"
}

func (v templateStepTypeValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (templateStepTypeValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	switch strings.ToUpper(req.ConfigValue.ValueString()) {
	case "RUN", "ENV", "WORKDIR", "USER":
	case "COPY":
		resp.Diagnostics.AddAttributeError(req.Path, "COPY steps are not supported by dreadnode_template",
			fmt.Sprintf("Attribute %s: COPY needs its files uploaded through E2B's template files route, which this resource does not do. "+
				"Write the files with a RUN step (e.g. a heredoc), or build the template with an E2B SDK.", req.Path))
	default:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid step type",
			fmt.Sprintf("Attribute %s must be RUN, ENV, WORKDIR or USER, got %q.", req.Path, req.ConfigValue.ValueString()))
	}
}

// templateCPUValidator: 1 or even, at most 32 (the backend's CheckResources).
type templateCPUValidator struct{}

func (templateCPUValidator) Description(context.Context) string {
	return fmt.Sprintf("1 or an even number, at most %d", apitypes.TemplateBuildRequestCPUCountMaximum)
}

func (v templateCPUValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (templateCPUValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if msg := cpuRule(req.ConfigValue.ValueInt64()); msg != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid cpu_count", fmt.Sprintf("Attribute %s: %s, got %d.", req.Path, msg, req.ConfigValue.ValueInt64()))
	}
}

// templateMemoryValidator: even, 128 to 32768.
type templateMemoryValidator struct{}

func (templateMemoryValidator) Description(context.Context) string {
	return fmt.Sprintf("an even number from %d to %d", apitypes.TemplateBuildRequestMemoryMBMinimum, apitypes.TemplateBuildRequestMemoryMBMaximum)
}

func (v templateMemoryValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (templateMemoryValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if msg := memoryRule(req.ConfigValue.ValueInt64()); msg != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid memory_mb", fmt.Sprintf("Attribute %s: %s, got %d.", req.Path, msg, req.ConfigValue.ValueInt64()))
	}
}

// cpuRule and memoryRule are the backend's rules (CheckResources), in its
// words; "" when v passes.
func cpuRule(v int64) string {
	switch {
	case v < apitypes.TemplateBuildRequestCPUCountMinimum:
		return "CPU count must be at least 1"
	case v > apitypes.TemplateBuildRequestCPUCountMaximum:
		return fmt.Sprintf("CPU count must be at most %d", apitypes.TemplateBuildRequestCPUCountMaximum)
	case v != 1 && v%2 != 0:
		return "CPU count must be 1 or an even number"
	}
	return ""
}

func memoryRule(v int64) string {
	switch {
	case v < apitypes.TemplateBuildRequestMemoryMBMinimum:
		return fmt.Sprintf("memory must be at least %d MB", apitypes.TemplateBuildRequestMemoryMBMinimum)
	case v > apitypes.TemplateBuildRequestMemoryMBMaximum:
		return fmt.Sprintf("memory can't be higher than %d MB", apitypes.TemplateBuildRequestMemoryMBMaximum)
	case v%2 != 0:
		return "memory must be divisible by 2"
	}
	return ""
}
