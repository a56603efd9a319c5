package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// Defaults of dreadnode_sandbox.
const (
	sandboxDefaultTimeoutSec    = apitypes.CreateSandboxTimeoutDefault
	sandboxDefaultCreateTimeout = 5 * time.Minute
	sandboxDefaultUpdateTimeout = 5 * time.Minute
	sandboxDefaultDeleteTimeout = 5 * time.Minute
	sandboxDefaultReadTimeout   = 1 * time.Minute

	// Server bounds of the create options: the API document's, which the
	// server enforces (a deployment may lower the minimum timeout with
	// DREADNODE_MIN_TIMEOUT_SEC; the provider checks the document's).
	sandboxMinTimeoutSec = apitypes.CreateSandboxTimeoutMinimum
	sandboxMaxTimeoutSec = apitypes.CreateSandboxTimeoutMaximum
	sandboxMinCPU        = apitypes.SandboxResourcesCPUCountMinimum
	sandboxMaxCPU        = apitypes.SandboxResourcesCPUCountMaximum
	sandboxMinMemoryMB   = apitypes.SandboxResourcesMemoryMBMinimum
	sandboxMaxMemoryMB   = apitypes.SandboxResourcesMemoryMBMaximum

	// After a sandbox with a command becomes running, the provider watches
	// it this long so that a command failing at once fails the apply
	// (instead of vanishing at the next refresh).
	sandboxSettleWindow = 2 * time.Second

	waitForRunning   = client.SandboxRunning
	waitForCompleted = client.SandboxCompleted
)

// envVarsBounds are the API document's bounds of a create's envVars: how
// many, and how long a value.
var envVarsBounds = []validator.Map{mapvalidator.SizeAtMost(apitypes.CreateSandboxEnvVarsMaxProperties),
	mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(apitypes.CreateSandboxEnvVarsValuesMaxLength))}

// envVarNames checks environment variable names with the server's syntax.
var envVarNames = mapvalidator.KeysAre(stringvalidator.RegexMatches(regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`),
	"must be an environment variable name (letters, digits and '_', not starting with a digit)"))

// templateIDPattern is the server's syntax of a template id or name,
// optionally with a ":tag" (an org's templates and snapshots have tags:
// a snapshot's snapshot_id is "<alias or id>:<tag>").
var templateIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.\-]{0,63}(:[a-z0-9_.\-]{1,128})?$`)

var (
	_ resource.Resource                   = (*sandboxResource)(nil)
	_ resource.ResourceWithConfigure      = (*sandboxResource)(nil)
	_ resource.ResourceWithImportState    = (*sandboxResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*sandboxResource)(nil)
	_ resource.ResourceWithValidateConfig = (*sandboxResource)(nil)
	_ resource.ResourceWithIdentity       = (*sandboxResource)(nil)
)

// NewSandboxResource returns the dreadnode_sandbox resource.
func NewSandboxResource() resource.Resource { return &sandboxResource{} }

type sandboxResource struct {
	data *providerData
}

type sandboxModel struct {
	ID          types.String   `tfsdk:"id"`
	Template    types.String   `tfsdk:"template"`
	Timeout     types.Int64    `tfsdk:"timeout"`
	EnvVars     types.Map      `tfsdk:"env_vars"`
	EnvVarsWO   types.Map      `tfsdk:"env_vars_wo"`
	EnvVarsWOV  types.Int64    `tfsdk:"env_vars_wo_version"`
	Metadata    types.Map      `tfsdk:"metadata"`
	AutoPause   types.Bool     `tfsdk:"auto_pause"`
	AutoResume  types.Bool     `tfsdk:"auto_resume"`
	Resources   types.Object   `tfsdk:"resources"`
	Network     types.Object   `tfsdk:"network"`
	Volumes     types.List     `tfsdk:"volume_mounts"`
	Command     types.List     `tfsdk:"command"`
	Paused      types.Bool     `tfsdk:"paused"`
	WaitFor     types.String   `tfsdk:"wait_for"`
	ExitCode    types.Int64    `tfsdk:"exit_code"`
	State       types.String   `tfsdk:"state"`
	StartedAt   types.String   `tfsdk:"started_at"`
	EndAt       types.String   `tfsdk:"end_at"`
	AccessToken types.String   `tfsdk:"access_token"`
	EnvdURL     types.String   `tfsdk:"envd_url"`
	ServiceURLs types.Map      `tfsdk:"service_urls"`
	CPUCount    types.Int64    `tfsdk:"cpu_count"`
	MemoryMB    types.Int64    `tfsdk:"memory_mb"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
}

type sandboxResourcesModel struct {
	CPUCount types.Int64 `tfsdk:"cpu_count"`
	MemoryMB types.Int64 `tfsdk:"memory_mb"`
}

type sandboxVolumeMountModel struct {
	Name     types.String `tfsdk:"name"`
	Path     types.String `tfsdk:"path"`
	ReadOnly types.Bool   `tfsdk:"read_only"`
}

type sandboxNetworkModel struct {
	AllowPublicTraffic  types.Bool `tfsdk:"allow_public_traffic"`
	AllowInternetAccess types.Bool `tfsdk:"allow_internet_access"`
	AllowOut            types.List `tfsdk:"allow_out"`
	DenyOut             types.List `tfsdk:"deny_out"`
}

func (r *sandboxResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox"
}

func (r *sandboxResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An agent sandbox: an isolated runtime created from a template (API `/sandboxes`).\n\n" +
			"The provider creates the sandbox, stores its `id` and `access_token` at once, then waits until it is `running`; " +
			"a sandbox that fails (the error carries the server's diagnostic) or does not start in time is kept in state as tainted. " +
			"`timeout`, `paused` and `wait_for` change in place; every other argument replaces the sandbox.\n\n" +
			"A sandbox that was deleted, failed or expired outside Terraform is removed from state with a warning that carries " +
			"the server's diagnostic (for example `the main process exited with code 3`), so the next plan re-creates it. " +
			"A sandbox with a `command` ends when the command exits: with `wait_for = \"running\"` (the default) it is a service " +
			"whose exit is drift (it is removed and re-created); with `wait_for = \"completed\"` it is a job: the apply waits " +
			"until the command exits 0 (a non-zero exit fails the apply) and the completed sandbox stays in state, so the job " +
			"runs once.\n\n" +
			"Secrets: `access_token` is kept in state (marked sensitive). To keep sandbox credentials out of state, use the " +
			"ephemeral resource `dreadnode_sandbox_connection` (Terraform 1.10 or later) and `env_vars_wo` (Terraform 1.11 or later).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The sandbox id (`sandboxID`).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"template": schema.StringAttribute{
				MarkdownDescription: "Template to create the sandbox from (`templateID`): one of the provider's, or one of the organization's templates " +
					"or snapshots by id or name, with or without `:tag` (for example `dreadnode_snapshot.x.snapshot_id`). " +
					"The server's default (`base`) when unset. " +
					"The plan checks that the template exists (a warning, not an error, when the API cannot be reached at plan).",
				Optional: true,
				Computed: true,
				Validators: []validator.String{
					stringvalidator.RegexMatches(templateIDPattern, "must be a template id such as \"base\" (lowercase letters, digits, '.', '_', '-'; at most 64), optionally with \":tag\""),
				},
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), replaceUnlessAdopting()},
			},
			"timeout": schema.Int64Attribute{
				MarkdownDescription: "Lifetime in seconds, counted from creation and again from every change of this value " +
					"(then set in place with `POST /sandboxes/{id}/timeout`). When it runs out the sandbox is deleted " +
					"(or paused with `auto_pause`). Default `300`.",
				Optional: true,
				Computed: true,
				Default:  int64default.StaticInt64(sandboxDefaultTimeoutSec),
				Validators: []validator.Int64{
					int64validator.Between(sandboxMinTimeoutSec, sandboxMaxTimeoutSec),
				},
			},
			"env_vars": schema.MapAttribute{
				MarkdownDescription: "Environment variables of the sandbox. The API never returns them. Stored in state (sensitive); " +
					"use `env_vars_wo` to keep them out of state.",
				ElementType:   types.StringType,
				Optional:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.Map{replaceUnlessAdopting()},
				Validators:    append([]validator.Map{mapvalidator.ConflictsWith(path.MatchRoot("env_vars_wo")), envVarNames}, envVarsBounds...),
			},
			"env_vars_wo": schema.MapAttribute{
				MarkdownDescription: "Write-only environment variables (Terraform 1.11 or later): sent at create, never stored in " +
					"plan or state. Terraform cannot see a change of them: change `env_vars_wo_version` to re-create the sandbox with new values.",
				ElementType: types.StringType,
				Optional:    true,
				Sensitive:   true,
				WriteOnly:   true,
				Validators:  append([]validator.Map{mapvalidator.AlsoRequires(path.MatchRoot("env_vars_wo_version")), envVarNames}, envVarsBounds...),
			},
			"env_vars_wo_version": schema.Int64Attribute{
				MarkdownDescription: "Version of `env_vars_wo`: changing it replaces the sandbox, which is created with the current `env_vars_wo`.",
				Optional:            true,
				PlanModifiers:       []planmodifier.Int64{replaceUnlessAdopting()},
				Validators:          []validator.Int64{int64validator.AlsoRequires(path.MatchRoot("env_vars_wo"))},
			},
			"metadata": schema.MapAttribute{
				MarkdownDescription: "User metadata, for search (see the `dreadnode_sandboxes` data source) and debugging.",
				ElementType:         types.StringType,
				Optional:            true,
				PlanModifiers:       []planmodifier.Map{replaceUnlessAdopting()},
				Validators: []validator.Map{mapvalidator.SizeAtMost(apitypes.CreateSandboxMetadataMaxProperties),
					mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(apitypes.CreateSandboxMetadataValuesMaxLength))},
			},
			"auto_pause": schema.BoolAttribute{
				MarkdownDescription: "When the timeout runs out, pause the sandbox instead of deleting it.",
				Optional:            true,
				PlanModifiers:       []planmodifier.Bool{replaceUnlessAdopting()},
			},
			"auto_resume": schema.BoolAttribute{
				MarkdownDescription: "Let traffic to a paused sandbox resume it.",
				Optional:            true,
				PlanModifiers:       []planmodifier.Bool{replaceUnlessAdopting()},
			},
			"resources": schema.SingleNestedAttribute{
				MarkdownDescription: "Requested resources (the template's defaults when unset). The granted values are `cpu_count` and `memory_mb`.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"cpu_count": schema.Int64Attribute{Optional: true, MarkdownDescription: fmt.Sprintf("Number of CPUs (%d to %d).", sandboxMinCPU, sandboxMaxCPU),
						Validators: []validator.Int64{int64validator.Between(sandboxMinCPU, sandboxMaxCPU)}},
					"memory_mb": schema.Int64Attribute{Optional: true, MarkdownDescription: fmt.Sprintf("Memory in MiB (%d to %d).", sandboxMinMemoryMB, sandboxMaxMemoryMB),
						Validators: []validator.Int64{int64validator.Between(sandboxMinMemoryMB, sandboxMaxMemoryMB)}},
				},
				PlanModifiers: []planmodifier.Object{replaceUnlessAdopting()},
			},
			"network": schema.SingleNestedAttribute{
				MarkdownDescription: "Public preview and egress policy.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"allow_public_traffic": schema.BoolAttribute{Optional: true, MarkdownDescription: "Allow traffic from outside to the sandbox's services."},
					"allow_internet_access": schema.BoolAttribute{Optional: true, MarkdownDescription: "Allow egress to the internet (`false` cuts all egress). " +
						"All or nothing: it conflicts with the per-destination rules `allow_out` and `deny_out`."},
					"allow_out": schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Destinations (domains, IPs or CIDRs) egress is allowed to.",
						Validators: []validator.List{listvalidator.ConflictsWith(path.MatchRelative().AtParent().AtName("allow_internet_access"))}},
					"deny_out": schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Destinations (domains, IPs or CIDRs) egress is denied to.",
						Validators: []validator.List{listvalidator.ConflictsWith(path.MatchRelative().AtParent().AtName("allow_internet_access"))}},
				},
				PlanModifiers: []planmodifier.Object{replaceUnlessAdopting()},
			},
			"volume_mounts": schema.ListNestedAttribute{
				MarkdownDescription: "Volumes of the organization (`dreadnode_volume`) mounted into the sandbox, each by `name` at `path`; " +
					"several sandboxes may mount one volume at once, and a volume outlives them. Referencing the volume " +
					"(`name = dreadnode_volume.x.name`) makes Terraform delete the sandbox before the volume, which the API " +
					"refuses to delete while a sandbox mounts it. The API does not report mounts: after an import they are " +
					"adopted from the configuration. Changing them replaces the sandbox.",
				Optional: true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{Required: true, MarkdownDescription: "The volume's name.",
							Validators: []validator.String{stringvalidator.RegexMatches(volumeNamePattern, "must be a volume name (letters, digits, '_' and '-')")}},
						"path": schema.StringAttribute{Required: true, MarkdownDescription: "Where the volume is mounted: a clean absolute path, " +
							"not `/`, `/proc`, `/sys`, `/dev` or under them.",
							Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^/.`), "must be an absolute path other than /")}},
						"read_only": schema.BoolAttribute{Optional: true, MarkdownDescription: "Mount it read-only."},
					},
				},
				PlanModifiers: []planmodifier.List{replaceUnlessAdopting()},
			},
			"command": schema.ListAttribute{
				MarkdownDescription: "Main process. When it exits the sandbox ends: `completed` on exit code 0, else `failed` with the exit code " +
					"in the server's diagnostic. See `wait_for` for what Terraform does then.",
				ElementType:   types.StringType,
				Optional:      true,
				PlanModifiers: []planmodifier.List{replaceUnlessAdopting()},
			},
			"paused": schema.BoolAttribute{
				MarkdownDescription: "Whether the sandbox is paused. Changes in place: `true` pauses it, `false` resumes it " +
					"(`POST /sandboxes/{id}/connect` with `timeout`, which also issues a new `access_token`). Default `false`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"wait_for": schema.StringAttribute{
				MarkdownDescription: "What create waits for: `running` (default; a sandbox whose `command` later exits is removed from " +
					"state at the next refresh, with a warning carrying the exit code) or `completed` (needs `command`: the apply " +
					"waits until the command exits, fails on a non-zero exit, and the completed sandbox stays in state as the record " +
					"of a job that ran). Changes in place (nothing changes on the server).",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(waitForRunning),
				Validators: []validator.String{stringvalidator.OneOf(waitForRunning, waitForCompleted)},
			},
			"exit_code": schema.Int64Attribute{
				MarkdownDescription: "Exit code of the main process once it has exited (with `wait_for = \"completed\"`: 0).",
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "Public state: `starting`, `running`, `paused`, `completed`, `failed` or `deleted`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{pausedState(client.SandboxPaused, client.SandboxRunning)},
			},
			"started_at": schema.StringAttribute{
				MarkdownDescription: "When the sandbox started (RFC 3339).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"end_at": schema.StringAttribute{
				MarkdownDescription: "When the sandbox's timeout runs out (RFC 3339). Moves when `timeout` changes and on resume.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessResumed("timeout")},
			},
			"access_token": schema.StringAttribute{
				MarkdownDescription: "Token for exec, files and the traffic router (header `X-Access-Token`). The API returns it only " +
					"from create and connect, so it is kept from state; resuming (`paused = false`) replaces it, pausing keeps it. " +
					"It cannot be recovered by `terraform import` (null after import). To keep it out of state, use the ephemeral " +
					"resource `dreadnode_sandbox_connection`, which connects and gets a fresh token at every run " +
					"(connecting revokes the previous token, this one included).",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.String{stateUnlessResumed()},
			},
			"envd_url": schema.StringAttribute{
				MarkdownDescription: "URL of the in-sandbox daemon.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessResumed()},
			},
			"service_urls": schema.MapNestedAttribute{
				MarkdownDescription: "Where the sandbox's services are reachable, keyed by service name or port.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"url":  schema.StringAttribute{Computed: true, MarkdownDescription: "URL of the service."},
						"host": schema.StringAttribute{Computed: true, MarkdownDescription: "Host of the service."},
						"port": schema.Int64Attribute{Computed: true, MarkdownDescription: "Port of the service."},
					},
				},
				PlanModifiers: []planmodifier.Map{stateUnlessResumed()},
			},
			"cpu_count": schema.Int64Attribute{
				MarkdownDescription: "CPUs granted to the sandbox.",
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"memory_mb": schema.Int64Attribute{
				MarkdownDescription: "Memory granted to the sandbox, in MiB.",
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Read: true, Update: true, Delete: true}),
		},
	}
}

func (r *sandboxResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// createRequest builds the POST /sandboxes body from the plan; envVarsWO
// is the write-only env_vars_wo of the configuration (never in the plan).
func (m *sandboxModel) createRequest(ctx context.Context, envVarsWO types.Map, diags *diag.Diagnostics) client.SandboxCreate {
	envVars := stringMap(ctx, m.EnvVars, diags)
	if envVars == nil {
		envVars = stringMap(ctx, envVarsWO, diags)
	}
	in := client.SandboxCreate{
		TemplateID: m.Template.ValueString(),
		Timeout:    intPtr(m.Timeout),
		EnvVars:    envVars,
		Metadata:   stringMap(ctx, m.Metadata, diags),
		AutoPause:  boolPtr(m.AutoPause),
		AutoResume: boolPtr(m.AutoResume),
		Command:    stringList(ctx, m.Command, diags),
	}
	if !m.Resources.IsNull() && !m.Resources.IsUnknown() {
		var rm sandboxResourcesModel
		diags.Append(m.Resources.As(ctx, &rm, basetypes.ObjectAsOptions{})...)
		in.Resources = &client.SandboxResources{CPUCount: intPtr(rm.CPUCount), MemoryMB: intPtr(rm.MemoryMB)}
	}
	if !m.Volumes.IsNull() && !m.Volumes.IsUnknown() {
		var vms []sandboxVolumeMountModel
		diags.Append(m.Volumes.ElementsAs(ctx, &vms, false)...)
		for _, vm := range vms {
			in.VolumeMounts = append(in.VolumeMounts, client.VolumeMount{Name: vm.Name.ValueString(), Path: vm.Path.ValueString(),
				ReadOnly: vm.ReadOnly.ValueBool(), Shared: true})
		}
	}
	if !m.Network.IsNull() && !m.Network.IsUnknown() {
		var nm sandboxNetworkModel
		diags.Append(m.Network.As(ctx, &nm, basetypes.ObjectAsOptions{})...)
		in.Network = &client.SandboxNetwork{
			AllowPublicTraffic:  boolPtr(nm.AllowPublicTraffic),
			AllowInternetAccess: boolPtr(nm.AllowInternetAccess),
			AllowOut:            stringList(ctx, nm.AllowOut, diags),
			DenyOut:             stringList(ctx, nm.DenyOut, diags),
		}
	}
	return in
}

// applySandbox copies what the API reports into the model. Arguments are
// left alone except on a freshly imported resource (null until read here).
func applySandbox(m *sandboxModel, sb *client.Sandbox, imported bool, diags *diag.Diagnostics) {
	if sb.SandboxID != "" {
		m.ID = types.StringValue(sb.SandboxID)
	}
	m.State = types.StringValue(sb.State)
	m.Paused = types.BoolValue(sb.State == client.SandboxPaused)
	m.StartedAt = stringOrNull(client.TimeText(sb.StartedAt))
	m.EndAt = stringOrNull(client.TimeText(sb.EndAt))
	m.EnvdURL = stringOrNull(sb.EnvdURL)
	m.ServiceURLs = endpointsValue(sb.ServiceURLs, diags)
	m.CPUCount = types.Int64Value(int64(sb.CPUCount))
	m.MemoryMB = types.Int64Value(int64(sb.MemoryMB))
	m.ExitCode = types.Int64PointerValue(int64PtrOf(sb.ExitCode))
	if sb.AccessToken != "" {
		m.AccessToken = types.StringValue(sb.AccessToken)
	} else if m.AccessToken.IsUnknown() {
		m.AccessToken = types.StringNull()
	}
	if m.Template.IsUnknown() || (imported && m.Template.IsNull()) {
		m.Template = stringOrNull(sb.TemplateID)
	}
	if !imported {
		return
	}
	if m.WaitFor.IsNull() {
		m.WaitFor = types.StringValue(waitForRunning)
		if sb.State == client.SandboxCompleted {
			m.WaitFor = types.StringValue(waitForCompleted)
		}
	}
	if m.Metadata.IsNull() {
		m.Metadata = mapValueOrNull(sb.Metadata, diags)
	}
	if m.Timeout.IsNull() && sb.Timeout > 0 { // 0: a server that does not report it
		m.Timeout = types.Int64Value(int64(sb.Timeout))
	}
	if m.AutoPause.IsNull() && sb.AutoPause {
		m.AutoPause = types.BoolValue(true)
	}
	if m.AutoResume.IsNull() && sb.AutoResume {
		m.AutoResume = types.BoolValue(true)
	}
}

// nullUnknowns replaces computed values still unknown by null, so a state
// saved before the wait holds no unknown values.
func (m *sandboxModel) nullUnknowns() {
	for _, s := range []*types.String{&m.Template, &m.State, &m.StartedAt, &m.EndAt, &m.AccessToken, &m.EnvdURL} {
		if s.IsUnknown() {
			*s = types.StringNull()
		}
	}
	if m.ServiceURLs.IsUnknown() {
		m.ServiceURLs = types.MapNull(endpointObjectType)
	}
	if m.CPUCount.IsUnknown() {
		m.CPUCount = types.Int64Null()
	}
	if m.MemoryMB.IsUnknown() {
		m.MemoryMB = types.Int64Null()
	}
	if m.ExitCode.IsUnknown() {
		m.ExitCode = types.Int64Null()
	}
}

func (r *sandboxResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan sandboxModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	createTimeout, d := plan.Timeouts.Create(ctx, sandboxDefaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	var envVarsWO types.Map
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("env_vars_wo"), &envVarsWO)...)
	in := plan.createRequest(ctx, envVarsWO, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()

	sb, err := r.data.client.CreateSandbox(ctx, in, client.NewIdempotencyKey())
	if err != nil {
		fields := sandboxFields
		if plan.EnvVars.IsNull() {
			fields = fields.with("envVars", "env_vars_wo{}")
		}
		apiErrorAt(&resp.Diagnostics, "Error creating sandbox", err, fields)
		return
	}
	tflog.Info(ctx, "created sandbox", map[string]any{"id": sb.SandboxID, "state": sb.State})

	// Save the id and the access token before waiting, so a failed or
	// timed-out wait leaves a tainted resource that still holds them.
	wantPaused := plan.Paused.ValueBool()
	applySandbox(&plan, sb, false, &resp.Diagnostics)
	plan.Paused = types.BoolValue(wantPaused)
	plan.nullUnknowns()
	setIDIdentity(ctx, resp.Identity, sb.SandboxID, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}

	id := sb.SandboxID
	cur := sb
	target := client.SandboxRunning
	if plan.WaitFor.ValueString() == waitForCompleted {
		target = client.SandboxCompleted
	}
	if sb.State != target {
		cur, err = waitSandbox(ctx, r.data.client, id, target, sb)
		if err == nil && target == client.SandboxRunning && !plan.Command.IsNull() {
			// A command that fails at once would otherwise pass this apply
			// and vanish at the next refresh: watch it briefly.
			cur, err = settleSandbox(ctx, r.data.client, id, cur, sandboxSettleWindow)
		}
		if err != nil {
			if cur != nil {
				plan.State = types.StringValue(cur.State)
				plan.ExitCode = types.Int64PointerValue(int64PtrOf(cur.ExitCode))
			}
			resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
			resp.Diagnostics.AddError("Error waiting for sandbox to become "+target,
				err.Error()+"\n\nThe sandbox is kept in state as tainted: the next apply replaces it, and terraform destroy deletes it.")
			return
		}
	}
	if target == client.SandboxCompleted {
		if cur == sb {
			if cur, err = r.data.client.GetSandbox(ctx, id); err != nil {
				apiError(&resp.Diagnostics, "Error reading sandbox", err)
				return
			}
		}
		cur.AccessToken = ""
		applySandbox(&plan, cur, false, &resp.Diagnostics)
		setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	if plan.AccessToken.IsNull() {
		// A retried create answered from its idempotency record carries no
		// token (the API shows it once); connect issues a fresh one.
		if sb2, err := r.data.client.ConnectSandbox(ctx, id, plan.Timeout.ValueInt64()); err != nil || sb2.AccessToken == "" {
			resp.Diagnostics.AddWarning("Sandbox created without an access token",
				fmt.Sprintf("The create answer of sandbox %s carried no access token and connect did not issue one (%v); access_token stays null until the sandbox is resumed or re-created.", id, err))
		} else {
			plan.AccessToken = types.StringValue(sb2.AccessToken)
		}
	}
	if wantPaused {
		if err := r.data.client.PauseSandbox(ctx, id); err != nil && !client.IsConflict(err) {
			apiError(&resp.Diagnostics, "Error pausing sandbox", err)
			return
		}
		if cur, err = waitSandbox(ctx, r.data.client, id, client.SandboxPaused, nil); err != nil {
			resp.Diagnostics.AddError("Error waiting for sandbox to pause", err.Error())
			return
		}
	} else if cur == sb {
		if cur, err = r.data.client.GetSandbox(ctx, id); err != nil {
			apiError(&resp.Diagnostics, "Error reading sandbox", err)
			return
		}
	}
	cur.AccessToken = "" // keep the one from create
	applySandbox(&plan, cur, false, &resp.Diagnostics)
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *sandboxResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state sandboxModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	readTimeout, d := state.Timeouts.Read(ctx, sandboxDefaultReadTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	id := state.ID.ValueString()
	// The framework wants the identity even when the resource is removed.
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	sb, err := r.data.client.GetSandbox(ctx, id)
	switch {
	case client.IsNotFound(err):
		resp.Diagnostics.AddWarning("Sandbox no longer exists",
			fmt.Sprintf("Sandbox %s was not found; it is removed from the state and the next plan creates a new one.", id))
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		apiError(&resp.Diagnostics, "Error reading sandbox", err)
		return
	}
	imported := isImported(ctx, req.Private)
	keepCompleted := sb.State == client.SandboxCompleted &&
		(state.WaitFor.ValueString() == waitForCompleted || (imported && state.WaitFor.IsNull()))
	if client.SandboxGone(sb.State) && !keepCompleted {
		resp.Diagnostics.AddWarning("Sandbox "+id+" is "+sb.State, goneDetail(sb))
		resp.State.RemoveResource(ctx)
		return
	}
	sb.AccessToken = "" // GET never shows it; keep the one in state
	applySandbox(&state, sb, imported, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *sandboxResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state sandboxModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	updateTimeout, d := plan.Timeouts.Update(ctx, sandboxDefaultUpdateTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()

	id := state.ID.ValueString()
	plan.ID = state.ID
	token := state.AccessToken
	timeoutChanged := !plan.Timeout.IsUnknown() && !plan.Timeout.IsNull() && !plan.Timeout.Equal(state.Timeout)
	pausedChanged := !plan.Paused.IsUnknown() && !plan.Paused.Equal(state.Paused)
	timeoutSec := plan.Timeout.ValueInt64()
	if plan.Timeout.IsNull() || plan.Timeout.IsUnknown() {
		timeoutSec = sandboxDefaultTimeoutSec
	}

	var cur *client.Sandbox
	switch {
	case pausedChanged && !plan.Paused.ValueBool():
		// Resume: connect resumes, sets the timeout and issues a new token.
		sb, err := r.data.client.ConnectSandbox(ctx, id, timeoutSec)
		if err != nil {
			apiError(&resp.Diagnostics, "Error resuming sandbox", err)
			return
		}
		if sb.AccessToken != "" {
			token = types.StringValue(sb.AccessToken)
		}
		if cur, err = waitSandbox(ctx, r.data.client, id, client.SandboxRunning, sb); err != nil {
			resp.Diagnostics.AddError("Error waiting for sandbox to resume", err.Error())
			return
		}
	default:
		if timeoutChanged {
			if err := r.data.client.SetSandboxTimeout(ctx, id, timeoutSec); err != nil {
				apiError(&resp.Diagnostics, "Error setting sandbox timeout", err)
				return
			}
		}
		if pausedChanged && plan.Paused.ValueBool() {
			if err := r.data.client.PauseSandbox(ctx, id); err != nil && !client.IsConflict(err) {
				apiError(&resp.Diagnostics, "Error pausing sandbox", err)
				return
			}
			var err error
			if cur, err = waitSandbox(ctx, r.data.client, id, client.SandboxPaused, nil); err != nil {
				resp.Diagnostics.AddError("Error waiting for sandbox to pause", err.Error())
				return
			}
		}
	}
	if cur == nil || timeoutChanged {
		var err error
		if cur, err = r.data.client.GetSandbox(ctx, id); err != nil {
			apiError(&resp.Diagnostics, "Error reading sandbox", err)
			return
		}
	}
	cur.AccessToken = ""
	plan.AccessToken = token
	applySandbox(&plan, cur, false, &resp.Diagnostics)
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	// The first apply after an import has adopted the configuration.
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, nil)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *sandboxResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state sandboxModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	deleteTimeout, d := state.Timeouts.Delete(ctx, sandboxDefaultDeleteTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()

	id := state.ID.ValueString()
	if err := r.data.client.DeleteSandbox(ctx, id); err != nil {
		if client.IsNotFound(err) {
			return
		}
		if sb, gerr := r.data.client.GetSandbox(ctx, id); client.IsConflict(err) && gerr == nil && client.SandboxGone(sb.State) {
			return // a completed job: nothing left to delete
		}
		apiError(&resp.Diagnostics, "Error deleting sandbox", err)
		return
	}
	if _, err := waitSandbox(ctx, r.data.client, id, client.SandboxDeleted, nil); err != nil {
		resp.Diagnostics.AddError("Error waiting for sandbox to be deleted", err.Error())
	}
}

func (r *sandboxResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, []byte(`true`))...)
}

// goneDetail tells the user why a sandbox left the state: the server's
// diagnostic (e.g. "the main process exited with code 3") and what happens next.
func goneDetail(sb *client.Sandbox) string {
	msg := fmt.Sprintf("Sandbox %s reached state %q outside of a Terraform apply", sb.SandboxID, sb.State)
	if d := sb.DiagnosticText(); d != "" {
		msg += ": " + d
	}
	if sb.ExitCode != nil && !strings.Contains(msg, fmt.Sprintf("code %d", *sb.ExitCode)) {
		msg += fmt.Sprintf(" (exit code %d)", *sb.ExitCode)
	}
	msg += ".\n\nIt is removed from the state, so the next plan creates a new one. Its output stays readable with " +
		"GET /sandboxes/" + sb.SandboxID + "/logs. For a command meant to run once, set wait_for = \"completed\"."
	return msg
}

// settleSandbox watches a sandbox that just became running for window and
// fails when it ends in that time (a command that exits at once).
func settleSandbox(ctx context.Context, c *client.Client, id string, cur *client.Sandbox, window time.Duration) (*client.Sandbox, error) {
	state, err := client.WaitState(ctx, cur.State, client.SandboxGone, func(ctx context.Context, _ string, _ time.Duration) (string, error) {
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			return "", err
		}
		cur = sb
		return sb.State, nil
	}, client.WaitOptions{Initial: sandboxPollInitial, Max: sandboxPollMax, Deadline: time.Now().Add(window)})
	var de *client.WaitDeadlineError
	switch {
	case errors.As(err, &de):
		return cur, nil // still running at the end of the window
	case err != nil && ctx.Err() != nil:
		return cur, &sandboxWaitError{id: id, target: client.SandboxRunning, state: cur.State, err: errWaitTimeout}
	case err != nil:
		return cur, &sandboxWaitError{id: id, target: client.SandboxRunning, state: cur.State, err: err}
	default:
		return cur, &sandboxWaitError{id: id, target: client.SandboxRunning, state: state, diagnostic: cur.DiagnosticText()}
	}
}

func (r *sandboxResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = idIdentitySchema("The sandbox id.")
}

func (r *sandboxResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var waitFor types.String
	var command types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("wait_for"), &waitFor)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("command"), &command)...)
	if waitFor.ValueString() == waitForCompleted && command.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("wait_for"), "wait_for = \"completed\" needs a command",
			"A sandbox completes when its main process exits; without `command` it runs until its timeout. Set `command`, or wait_for = \"running\".")
	}
}

// ModifyPlan checks, when a sandbox is to be created, that its template
// exists: an unknown template fails the plan instead of the apply. When the
// API cannot be reached at plan, a warning says so and the apply decides.
func (r *sandboxResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.data == nil {
		return
	}
	checkAtPlan(ctx, req, resp, "template", "template", func(ctx context.Context, id string) error {
		_, err := r.data.client.GetTemplate(ctx, id)
		return err
	})
}
