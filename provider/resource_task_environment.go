package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
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

// Default timeouts of dreadnode_task_environment.
const (
	taskEnvDefaultCreateTimeout = 15 * time.Minute
	taskEnvDefaultUpdateTimeout = 10 * time.Minute
	taskEnvDefaultDeleteTimeout = 10 * time.Minute
	taskEnvDefaultReadTimeout   = 1 * time.Minute

	// Bounds of timeout_sec: the API document's (CreateTaskEnvironment), the
	// server's defaults (a deployment may narrow them).
	taskEnvMinTimeoutSec = apitypes.CreateTaskEnvironmentTimeoutSecMinimum
	taskEnvMaxTimeoutSec = apitypes.CreateTaskEnvironmentTimeoutSecMaximum
)

var (
	_ resource.Resource                = (*taskEnvironmentResource)(nil)
	_ resource.ResourceWithConfigure   = (*taskEnvironmentResource)(nil)
	_ resource.ResourceWithImportState = (*taskEnvironmentResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*taskEnvironmentResource)(nil)
	_ resource.ResourceWithIdentity    = (*taskEnvironmentResource)(nil)
)

// NewTaskEnvironmentResource returns the dreadnode_task_environment resource.
func NewTaskEnvironmentResource() resource.Resource { return &taskEnvironmentResource{} }

type taskEnvironmentResource struct {
	data *providerData
}

type taskEnvironmentModel struct {
	ID           types.String   `tfsdk:"id"`
	TaskRef      types.String   `tfsdk:"task_ref"`
	Inputs       types.Map      `tfsdk:"inputs"`
	TimeoutSec   types.Int64    `tfsdk:"timeout_sec"`
	ProjectID    types.String   `tfsdk:"project_id"`
	SecretIDs    types.List     `tfsdk:"secret_ids"`
	Paused       types.Bool     `tfsdk:"paused"`
	State        types.String   `tfsdk:"state"`
	ServiceURLs  types.Map      `tfsdk:"service_urls"`
	Instruction  types.String   `tfsdk:"instruction"`
	ExpiresAt    types.String   `tfsdk:"expires_at"`
	CreatedAt    types.String   `tfsdk:"created_at"`
	ExecuteToken types.String   `tfsdk:"execute_token"`
	Timeouts     timeouts.Value `tfsdk:"timeouts"`
}

func (r *taskEnvironmentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_task_environment"
}

func (r *taskEnvironmentResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A task environment: a running instance of a task from the catalog (its Docker Compose services), " +
			"with the URLs of its services, its instruction and a token to run commands in it.\n\n" +
			"Creating it returns at once with state `building`; the provider then waits (backoff 1 s → 5 s) until the " +
			"environment is `ready`. If the environment fails or the wait times out, the resource is kept in state with " +
			"its `id` and `execute_token` and marked tainted, so the next apply replaces it and a destroy tears it down.\n\n" +
			"Only `paused` can change in place; every other argument replaces the environment. An environment that is " +
			"torn down, has failed or no longer exists outside Terraform is removed from state with a warning carrying the " +
			"server's error (the next plan re-creates it).\n\n" +
			"The `execute_token` is returned by the API only in the create response (the server keeps only its hash), so it " +
			"lives in the state of the configuration that created the environment, marked sensitive. No data source or " +
			"ephemeral resource can read it later: a lost token cannot be recovered; re-create the environment.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The environment's id.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"task_ref": schema.StringAttribute{
				MarkdownDescription: "The task to run: `[org/]name[@version]`. The plan checks that the task exists in the catalog " +
					"(a warning, not an error, when the API cannot be reached at plan).",
				Required:      true,
				PlanModifiers: []planmodifier.String{replaceUnlessAdopting()},
			},
			"inputs": schema.MapAttribute{
				MarkdownDescription: "Values of the task's inputs (the task's defaults apply to the others). Sensitive: inputs " +
					"often hold the task's flag or credentials.",
				ElementType:   types.StringType,
				Optional:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.Map{replaceUnlessAdopting()},
			},
			"timeout_sec": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("Lifetime of the environment in seconds (%d to %d). The server's default when unset (then reported here).", taskEnvMinTimeoutSec, taskEnvMaxTimeoutSec),
				Optional:            true,
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown(), replaceUnlessAdopting()},
				Validators:          []validator.Int64{int64validator.Between(taskEnvMinTimeoutSec, taskEnvMaxTimeoutSec)},
			},
			"project_id": schema.StringAttribute{
				MarkdownDescription: "Project the environment is accounted to.",
				Optional:            true,
				PlanModifiers:       []planmodifier.String{replaceUnlessAdopting()},
			},
			"secret_ids": schema.ListAttribute{
				MarkdownDescription: "Ids of secrets made available to the environment.",
				ElementType:         types.StringType,
				Optional:            true,
				PlanModifiers:       []planmodifier.List{replaceUnlessAdopting()},
			},
			"paused": schema.BoolAttribute{
				MarkdownDescription: "Whether the environment is paused (suspended, not accruing credits). Changes in place. Default `false`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(false),
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "Lifecycle state: `building`, `provisioning`, `ready`, `paused`, `torn_down` or `failed`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{pausedState(client.EnvPaused, client.EnvReady)},
			},
			"service_urls": schema.MapNestedAttribute{
				MarkdownDescription: "Where each service of the task is reachable, keyed by service name.",
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
			"instruction": schema.StringAttribute{
				MarkdownDescription: "The task's instruction with the service URLs, hosts and ports filled in.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessResumed()},
			},
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the environment expires (RFC 3339).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stateUnlessResumed()},
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the environment was created (RFC 3339).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"execute_token": schema.StringAttribute{
				MarkdownDescription: "Token for `POST …/environments/{id}/execute` (header `X-Environment-Token`). " +
					"The API returns it only in the create response, so it is known only to the Terraform state that created " +
					"the environment. It cannot be recovered: after `terraform import` it is null (re-create the environment to get one), " +
					"and no data source or ephemeral resource can fetch it, because the server never returns it again.",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Read: true, Update: true, Delete: true}),
		},
	}
}

func (r *taskEnvironmentResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// applyEnvironment copies what the API reports into the model. Arguments the
// user wrote are left alone (the API may normalise them), except on a
// freshly imported resource, whose arguments are null until read here.
func applyEnvironment(m *taskEnvironmentModel, env *client.Environment, imported bool, diags *diag.Diagnostics) {
	m.ID = types.StringValue(env.ID)
	m.State = types.StringValue(env.State)
	m.Paused = types.BoolValue(env.State == client.EnvPaused)
	m.ServiceURLs = endpointsValue(env.ServiceURLs, diags)
	m.Instruction = stringOrNull(derefString(env.Instruction))
	m.ExpiresAt = stringOrNull(client.TimeText(env.ExpiresAt))
	if !env.CreatedAt.IsZero() {
		m.CreatedAt = types.StringValue(client.TimeText(&env.CreatedAt))
	} else if m.CreatedAt.IsUnknown() {
		m.CreatedAt = types.StringNull()
	}
	if env.ExecuteToken != "" {
		m.ExecuteToken = types.StringValue(env.ExecuteToken)
	} else if m.ExecuteToken.IsUnknown() {
		m.ExecuteToken = types.StringNull()
	}
	if m.TimeoutSec.IsUnknown() || (imported && m.TimeoutSec.IsNull()) {
		m.TimeoutSec = types.Int64Null()
		if env.TimeoutSec > 0 { // 0: an answer without it (a status poll)
			m.TimeoutSec = types.Int64Value(int64(env.TimeoutSec))
		}
	}
	if !imported {
		return
	}
	if m.TaskRef.IsNull() && env.TaskRef != "" {
		m.TaskRef = types.StringValue(env.TaskRef)
	}
	if m.Inputs.IsNull() && len(env.Inputs) > 0 {
		m.Inputs = mapValueOrNull(env.Inputs, diags)
	}
	if m.ProjectID.IsNull() && env.ProjectID != nil && *env.ProjectID != "" {
		m.ProjectID = types.StringValue(*env.ProjectID)
	}
	if m.SecretIDs.IsNull() && len(env.SecretIDs) > 0 {
		m.SecretIDs = listValueOrNull(env.SecretIDs, diags)
	}
}

// mergeStatus copies a status poll (a subset of the resource) into the model.
func mergeStatus(m *taskEnvironmentModel, st *client.Environment, diags *diag.Diagnostics) {
	if st == nil {
		return
	}
	m.State = types.StringValue(st.State)
	if st.ServiceURLs != nil {
		m.ServiceURLs = endpointsValue(st.ServiceURLs, diags)
	}
	if st.ExpiresAt != nil {
		m.ExpiresAt = types.StringValue(client.TimeText(st.ExpiresAt))
	}
}

// nullUnknowns replaces computed values still unknown by null, so a state
// saved before the wait holds no unknown values.
func (m *taskEnvironmentModel) nullUnknowns() {
	if m.State.IsUnknown() {
		m.State = types.StringNull()
	}
	if m.ServiceURLs.IsUnknown() {
		m.ServiceURLs = types.MapNull(endpointObjectType)
	}
	if m.Instruction.IsUnknown() {
		m.Instruction = types.StringNull()
	}
	if m.ExpiresAt.IsUnknown() {
		m.ExpiresAt = types.StringNull()
	}
	if m.CreatedAt.IsUnknown() {
		m.CreatedAt = types.StringNull()
	}
	if m.ExecuteToken.IsUnknown() {
		m.ExecuteToken = types.StringNull()
	}
	if m.TimeoutSec.IsUnknown() {
		m.TimeoutSec = types.Int64Null()
	}
}

func (r *taskEnvironmentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan taskEnvironmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	org, ws, ok := r.data.requireWorkspace(&resp.Diagnostics)
	if !ok {
		return
	}
	createTimeout, d := plan.Timeouts.Create(ctx, taskEnvDefaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}

	in := client.EnvironmentCreate{
		TaskRef:    plan.TaskRef.ValueString(),
		Inputs:     stringMap(ctx, plan.Inputs, &resp.Diagnostics),
		TimeoutSec: intPtr(plan.TimeoutSec),
		ProjectID:  plan.ProjectID.ValueString(),
		SecretIDs:  stringList(ctx, plan.SecretIDs, &resp.Diagnostics),
	}
	if resp.Diagnostics.HasError() {
		return
	}

	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()

	env, err := r.data.client.CreateEnvironment(ctx, org, ws, in, client.NewIdempotencyKey())
	if err != nil {
		apiErrorAt(&resp.Diagnostics, "Error creating task environment", err, environmentFields)
		return
	}
	tflog.Info(ctx, "created task environment", map[string]any{"id": env.ID, "state": env.State})
	if env.ExecuteToken == "" {
		// A retried create answered from its idempotency record: the token
		// was in the lost first answer and is never shown again.
		resp.Diagnostics.AddWarning("Task environment created without an execute token",
			fmt.Sprintf("The create answer of environment %s carried no execute_token (it is shown only once, and this answer replayed an earlier one). execute_token stays null; re-create the environment if you need it.", env.ID))
	}

	// Save the id and the execute token (shown only now) before waiting, so
	// a failed or timed-out wait leaves a tainted resource that still holds them.
	wantPaused := plan.Paused.ValueBool()
	applyEnvironment(&plan, env, false, &resp.Diagnostics)
	plan.Paused = types.BoolValue(wantPaused)
	plan.nullUnknowns()
	setIDIdentity(ctx, resp.Identity, env.ID, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}

	st, err := waitEnvironment(ctx, r.data.client, org, ws, env.ID, client.EnvReady, env)
	if err != nil {
		mergeStatus(&plan, st, &resp.Diagnostics)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		resp.Diagnostics.AddError("Error waiting for task environment to become ready",
			err.Error()+"\n\nThe environment is kept in state as tainted: the next apply replaces it, and terraform destroy tears it down.")
		return
	}

	if wantPaused {
		if err := r.data.client.PauseEnvironment(ctx, org, ws, env.ID); err != nil && !client.IsConflict(err) {
			resp.Diagnostics.AddError("Error pausing task environment", err.Error())
			return
		}
		if _, err := waitEnvironment(ctx, r.data.client, org, ws, env.ID, client.EnvPaused, nil); err != nil {
			resp.Diagnostics.AddError("Error waiting for task environment to pause", err.Error())
			return
		}
	}

	full, err := r.data.client.GetEnvironment(ctx, org, ws, env.ID)
	if err != nil {
		apiError(&resp.Diagnostics, "Error reading task environment", err)
		return
	}
	applyEnvironment(&plan, full, false, &resp.Diagnostics)
	setIDIdentity(ctx, resp.Identity, env.ID, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *taskEnvironmentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state taskEnvironmentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	org, ws, ok := r.data.requireWorkspace(&resp.Diagnostics)
	if !ok {
		return
	}
	readTimeout, d := state.Timeouts.Read(ctx, taskEnvDefaultReadTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	id := state.ID.ValueString()
	// The framework wants the identity even when the resource is removed.
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	env, err := r.data.client.GetEnvironment(ctx, org, ws, id)
	switch {
	case client.IsNotFound(err):
		resp.Diagnostics.AddWarning("Task environment no longer exists",
			fmt.Sprintf("Task environment %s was not found; it is removed from the state and the next plan creates a new one.", id))
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		apiError(&resp.Diagnostics, "Error reading task environment", err)
		return
	}
	if env.State == client.EnvTornDown || env.State == client.EnvFailed {
		detail := fmt.Sprintf("Task environment %s reached state %q outside of a Terraform apply", id, env.State)
		if e := env.ErrorText(); e != "" {
			detail += ": " + e
		}
		resp.Diagnostics.AddWarning("Task environment "+id+" is "+env.State,
			detail+".\n\nIt is removed from the state, so the next plan creates a new one.")
		resp.State.RemoveResource(ctx)
		return
	}
	if env.ID == "" {
		env.ID = id
	}
	applyEnvironment(&state, env, isImported(ctx, req.Private), &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *taskEnvironmentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state taskEnvironmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	org, ws, ok := r.data.requireWorkspace(&resp.Diagnostics)
	if !ok {
		return
	}
	updateTimeout, d := plan.Timeouts.Update(ctx, taskEnvDefaultUpdateTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()

	id := state.ID.ValueString()
	if !plan.Paused.IsUnknown() && !plan.Paused.Equal(state.Paused) {
		var err error
		target := client.EnvReady
		if plan.Paused.ValueBool() {
			target = client.EnvPaused
			err = r.data.client.PauseEnvironment(ctx, org, ws, id)
		} else {
			err = r.data.client.ResumeEnvironment(ctx, org, ws, id)
		}
		if err != nil && !client.IsConflict(err) {
			apiError(&resp.Diagnostics, "Error changing paused of task environment", err)
			return
		}
		if _, err := waitEnvironment(ctx, r.data.client, org, ws, id, target, nil); err != nil {
			resp.Diagnostics.AddError("Error waiting for task environment to become "+target, err.Error())
			return
		}
	}

	env, err := r.data.client.GetEnvironment(ctx, org, ws, id)
	if err != nil {
		apiError(&resp.Diagnostics, "Error reading task environment", err)
		return
	}
	plan.ID = state.ID
	plan.ExecuteToken = state.ExecuteToken
	applyEnvironment(&plan, env, false, &resp.Diagnostics)
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	// The first apply after an import has adopted the configuration.
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, nil)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *taskEnvironmentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state taskEnvironmentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	org, ws, ok := r.data.requireWorkspace(&resp.Diagnostics)
	if !ok {
		return
	}
	deleteTimeout, d := state.Timeouts.Delete(ctx, taskEnvDefaultDeleteTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()

	id := state.ID.ValueString()
	if err := r.data.client.DeleteEnvironment(ctx, org, ws, id); err != nil {
		if client.IsNotFound(err) {
			return
		}
		apiError(&resp.Diagnostics, "Error deleting task environment", err)
		return
	}
	if _, err := waitEnvironment(ctx, r.data.client, org, ws, id, client.EnvTornDown, nil); err != nil {
		resp.Diagnostics.AddError("Error waiting for task environment to be torn down", err.Error())
	}
}

func (r *taskEnvironmentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, []byte(`true`))...)
}

func (r *taskEnvironmentResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = idIdentitySchema("The task environment's id.")
}

// ModifyPlan checks, when an environment is to be created, that task_ref
// names a task of the catalog: an unknown task fails the plan instead of
// the apply. When the API cannot be reached at plan, a warning says so.
func (r *taskEnvironmentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.data == nil || r.data.org == "" {
		return
	}
	checkAtPlan(ctx, req, resp, "task_ref", "task", func(ctx context.Context, ref string) error {
		_, err := r.data.client.GetTask(ctx, r.data.org, ref)
		return err
	})
}
