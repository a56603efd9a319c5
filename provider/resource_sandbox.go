package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// Defaults of dreadnode_sandbox.
const (
	sandboxDefaultTimeoutSec    = 300
	sandboxDefaultCreateTimeout = 5 * time.Minute
	sandboxDefaultUpdateTimeout = 5 * time.Minute
	sandboxDefaultDeleteTimeout = 5 * time.Minute
)

var (
	_ resource.Resource                = (*sandboxResource)(nil)
	_ resource.ResourceWithConfigure   = (*sandboxResource)(nil)
	_ resource.ResourceWithImportState = (*sandboxResource)(nil)
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
	Metadata    types.Map      `tfsdk:"metadata"`
	AutoPause   types.Bool     `tfsdk:"auto_pause"`
	AutoResume  types.Bool     `tfsdk:"auto_resume"`
	Resources   types.Object   `tfsdk:"resources"`
	Network     types.Object   `tfsdk:"network"`
	Command     types.List     `tfsdk:"command"`
	Paused      types.Bool     `tfsdk:"paused"`
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
			"`timeout` and `paused` change in place; every other argument replaces the sandbox. " +
			"A sandbox that was deleted, completed, failed or expired outside Terraform is removed from state, so the next plan re-creates it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The sandbox id (`sandboxID`).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"template": schema.StringAttribute{
				MarkdownDescription: "Template to create the sandbox from (`templateID`). The server's default (`base`) when unset.",
				Optional:            true,
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown(), replaceUnlessAdopting()},
			},
			"timeout": schema.Int64Attribute{
				MarkdownDescription: "Lifetime in seconds, counted from creation and again from every change of this value " +
					"(then set in place with `POST /sandboxes/{id}/timeout`). When it runs out the sandbox is deleted " +
					"(or paused with `auto_pause`). Default `300`.",
				Optional: true,
				Computed: true,
				Default:  int64default.StaticInt64(sandboxDefaultTimeoutSec),
				Validators: []validator.Int64{
					atLeast(1),
				},
			},
			"env_vars": schema.MapAttribute{
				MarkdownDescription: "Environment variables of the sandbox. The API never returns them.",
				ElementType:         types.StringType,
				Optional:            true,
				Sensitive:           true,
				PlanModifiers:       []planmodifier.Map{replaceUnlessAdopting()},
			},
			"metadata": schema.MapAttribute{
				MarkdownDescription: "User metadata, for search (see the `dreadnode_sandboxes` data source) and debugging.",
				ElementType:         types.StringType,
				Optional:            true,
				PlanModifiers:       []planmodifier.Map{replaceUnlessAdopting()},
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
					"cpu_count": schema.Int64Attribute{Optional: true, MarkdownDescription: "Number of CPUs.", Validators: []validator.Int64{atLeast(1)}},
					"memory_mb": schema.Int64Attribute{Optional: true, MarkdownDescription: "Memory in MiB.", Validators: []validator.Int64{atLeast(1)}},
				},
				PlanModifiers: []planmodifier.Object{replaceUnlessAdopting()},
			},
			"network": schema.SingleNestedAttribute{
				MarkdownDescription: "Public preview and egress policy.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"allow_public_traffic":  schema.BoolAttribute{Optional: true, MarkdownDescription: "Allow traffic from outside to the sandbox's services."},
					"allow_internet_access": schema.BoolAttribute{Optional: true, MarkdownDescription: "Allow egress to the internet (`false` cuts all egress)."},
					"allow_out":             schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Destinations (domains, IPs or CIDRs) egress is allowed to."},
					"deny_out":              schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Destinations (domains, IPs or CIDRs) egress is denied to."},
				},
				PlanModifiers: []planmodifier.Object{replaceUnlessAdopting()},
			},
			"command": schema.ListAttribute{
				MarkdownDescription: "Main process. When it exits the sandbox ends (`completed` on exit code 0, else `failed`) and is removed from state.",
				ElementType:         types.StringType,
				Optional:            true,
				PlanModifiers:       []planmodifier.List{replaceUnlessAdopting()},
			},
			"paused": schema.BoolAttribute{
				MarkdownDescription: "Whether the sandbox is paused. Changes in place: `true` pauses it, `false` resumes it " +
					"(`POST /sandboxes/{id}/connect` with `timeout`, which also issues a new `access_token`). Default `false`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "Public state: `starting`, `running`, `paused`, `completed`, `failed` or `deleted`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessChanged("paused")},
			},
			"started_at": schema.StringAttribute{
				MarkdownDescription: "When the sandbox started (RFC 3339).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessChanged("paused")},
			},
			"end_at": schema.StringAttribute{
				MarkdownDescription: "When the sandbox's timeout runs out (RFC 3339).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessChanged("paused", "timeout")},
			},
			"access_token": schema.StringAttribute{
				MarkdownDescription: "Token for exec, files and the traffic router (header `X-Access-Token`). The API returns it only " +
					"from create and connect, so it is kept from state; resuming (`paused = false`) replaces it. " +
					"It cannot be recovered by `terraform import` (null after import).",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.String{stateUnlessChanged("paused")},
			},
			"envd_url": schema.StringAttribute{
				MarkdownDescription: "URL of the in-sandbox daemon.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessChanged("paused")},
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
				PlanModifiers: []planmodifier.Map{stateUnlessChanged("paused")},
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
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}

func (r *sandboxResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

var (
	sandboxResourcesAttrTypes = map[string]attr.Type{"cpu_count": types.Int64Type, "memory_mb": types.Int64Type}
	sandboxNetworkAttrTypes   = map[string]attr.Type{
		"allow_public_traffic":  types.BoolType,
		"allow_internet_access": types.BoolType,
		"allow_out":             types.ListType{ElemType: types.StringType},
		"deny_out":              types.ListType{ElemType: types.StringType},
	}
)

// createRequest builds the POST /sandboxes body from the plan.
func (m *sandboxModel) createRequest(ctx context.Context, diags *diag.Diagnostics) client.SandboxCreate {
	in := client.SandboxCreate{
		TemplateID: m.Template.ValueString(),
		Timeout:    int64Ptr(m.Timeout),
		EnvVars:    stringMap(ctx, m.EnvVars, diags),
		Metadata:   stringMap(ctx, m.Metadata, diags),
		AutoPause:  boolPtr(m.AutoPause),
		AutoResume: boolPtr(m.AutoResume),
		Command:    stringList(ctx, m.Command, diags),
	}
	if !m.Resources.IsNull() && !m.Resources.IsUnknown() {
		var rm sandboxResourcesModel
		diags.Append(m.Resources.As(ctx, &rm, basetypes.ObjectAsOptions{})...)
		in.Resources = &client.SandboxResources{CPUCount: int64Ptr(rm.CPUCount), MemoryMB: int64Ptr(rm.MemoryMB)}
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
	m.StartedAt = stringOrNull(sb.StartedAt)
	m.EndAt = stringOrNull(sb.EndAt)
	m.EnvdURL = stringOrNull(sb.EnvdURL)
	m.ServiceURLs = endpointsValue(sb.ServiceURLs, diags)
	m.CPUCount = types.Int64Value(sb.CPUCount)
	m.MemoryMB = types.Int64Value(sb.MemoryMB)
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
	if m.Metadata.IsNull() {
		m.Metadata = mapValueOrNull(sb.Metadata, diags)
	}
	if m.Timeout.IsNull() && sb.Timeout != nil {
		m.Timeout = types.Int64Value(*sb.Timeout)
	}
	if m.AutoPause.IsNull() && sb.AutoPause != nil && *sb.AutoPause {
		m.AutoPause = types.BoolValue(true)
	}
	if m.AutoResume.IsNull() && sb.AutoResume != nil && *sb.AutoResume {
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
}

func (r *sandboxResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan sandboxModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	createTimeout, d := plan.Timeouts.Create(ctx, sandboxDefaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	in := plan.createRequest(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()

	sb, err := r.data.client.CreateSandbox(ctx, in, client.NewIdempotencyKey())
	if err != nil {
		apiError(&resp.Diagnostics, "Error creating sandbox", err)
		return
	}
	tflog.Info(ctx, "created sandbox", map[string]any{"id": sb.SandboxID, "state": sb.State})

	// Save the id and the access token before waiting, so a failed or
	// timed-out wait leaves a tainted resource that still holds them.
	wantPaused := plan.Paused.ValueBool()
	applySandbox(&plan, sb, false, &resp.Diagnostics)
	plan.Paused = types.BoolValue(wantPaused)
	plan.nullUnknowns()
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}

	id := sb.SandboxID
	cur := sb
	if sb.State != client.SandboxRunning {
		cur, err = waitSandbox(ctx, r.data.client, id, client.SandboxRunning, sb)
		if err != nil {
			if cur != nil {
				plan.State = types.StringValue(cur.State)
			}
			resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
			resp.Diagnostics.AddError("Error waiting for sandbox to become running",
				err.Error()+"\n\nThe sandbox is kept in state as tainted: the next apply replaces it, and terraform destroy deletes it.")
			return
		}
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
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *sandboxResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state sandboxModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	sb, err := r.data.client.GetSandbox(ctx, state.ID.ValueString())
	switch {
	case client.IsNotFound(err):
		tflog.Warn(ctx, "sandbox no longer exists; removing it from state", map[string]any{"id": state.ID.ValueString()})
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		apiError(&resp.Diagnostics, "Error reading sandbox", err)
		return
	}
	if client.SandboxGone(sb.State) {
		tflog.Warn(ctx, "sandbox is "+sb.State+"; removing it from state", map[string]any{"id": state.ID.ValueString(), "diagnostic": sb.DiagnosticText()})
		resp.State.RemoveResource(ctx)
		return
	}
	sb.AccessToken = "" // GET never shows it; keep the one in state
	applySandbox(&state, sb, isImported(ctx, req.Private), &resp.Diagnostics)
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
		apiError(&resp.Diagnostics, "Error deleting sandbox", err)
		return
	}
	if _, err := waitSandbox(ctx, r.data.client, id, client.SandboxDeleted, nil); err != nil {
		resp.Diagnostics.AddError("Error waiting for sandbox to be deleted", err.Error())
	}
}

func (r *sandboxResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, []byte(`true`))...)
}
