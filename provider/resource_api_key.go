package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// Scopes of an API key (API §11).
const (
	apiKeyScopeFull = "full"
	apiKeyScopeRead = "read"
)

var (
	_ resource.Resource                = (*apiKeyResource)(nil)
	_ resource.ResourceWithConfigure   = (*apiKeyResource)(nil)
	_ resource.ResourceWithImportState = (*apiKeyResource)(nil)
)

// apiKeyFields are the fields of POST …/keys.
var apiKeyFields = fieldPaths{"name": "name", "scope": "scope", "expiresAt": "expires_at"}

// NewAPIKeyResource returns the dreadnode_api_key resource.
func NewAPIKeyResource() resource.Resource { return &apiKeyResource{} }

type apiKeyResource struct {
	data *providerData
}

type apiKeyModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Scope     types.String `tfsdk:"scope"`
	ExpiresAt types.String `tfsdk:"expires_at"`
	Prefix    types.String `tfsdk:"prefix"`
	CreatedAt types.String `tfsdk:"created_at"`
	Key       types.String `tfsdk:"key"`
}

func (r *apiKeyResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_api_key"
}

func (r *apiKeyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An API key of the provider's organization, for a CI job or another team's configuration.\n\n" +
			"The secret (`key`) is returned by the API only when the key is made (the server keeps only its hash): it lives " +
			"in the state of the configuration that created it, marked sensitive, and nowhere else. Every argument replaces " +
			"the key (a new secret). Destroying the resource revokes the key; it is refused at once.\n\n" +
			"A key revoked outside Terraform, or past its `expires_at`, is removed from state with a warning, so the " +
			"next plan creates a new one.\n\n" +
			"An imported key has no `key` (null): the secret cannot be read back; replace the resource to get one.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The key's id (`key_…`).",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "What the key is for (1 to 100 characters). Changing it replaces the key.",
				Required:            true,
				PlanModifiers:       replace,
				Validators:          []validator.String{stringvalidator.LengthBetween(1, apitypes.CreateAPIKeyNameMaxLength)},
			},
			"scope": schema.StringAttribute{
				MarkdownDescription: "`full` (default) or `read`: a `read` key can only read (GET); every write is refused with 403. " +
					"Changing it replaces the key.",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(apiKeyScopeFull),
				PlanModifiers: replace,
				Validators:    []validator.String{stringvalidator.OneOf(apiKeyScopeFull, apiKeyScopeRead)},
			},
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the key stops working, RFC 3339 (`2030-01-02T15:04:05Z`), in the future; unset: never. " +
					"Changing it replaces the key.",
				Optional:      true,
				PlanModifiers: replace,
				Validators:    []validator.String{rfc3339Validator{}},
			},
			"prefix": schema.StringAttribute{
				MarkdownDescription: "The secret's first characters, to tell keys apart (in `GET …/keys` and the backend's logs).",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the key was made (RFC 3339).",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"key": schema.StringAttribute{
				MarkdownDescription: "The secret, to use as `api_key`. Known only to the configuration that created the key; " +
					"null after an import.",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: keep,
			},
		},
	}
}

func (r *apiKeyResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// applyAPIKey copies what the API reports into the model. expires_at is
// left as written (the API may print the same instant differently) unless
// it is null, as after an import.
func applyAPIKey(m *apiKeyModel, k *client.APIKey) {
	m.ID = types.StringValue(k.Id)
	m.Name = types.StringValue(k.Name)
	m.Scope = types.StringValue(string(k.Scope))
	m.Prefix = types.StringValue(k.Prefix)
	m.CreatedAt = types.StringValue(k.CreatedAt.UTC().Format(time.RFC3339))
	if k.ExpiresAt != nil && m.ExpiresAt.IsNull() {
		m.ExpiresAt = types.StringValue(k.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if m.Key.IsUnknown() {
		m.Key = types.StringNull()
	}
}

func (r *apiKeyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan apiKeyModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	org, ok := r.data.requireOrg(&resp.Diagnostics)
	if !ok {
		return
	}
	in := client.APIKeyCreate{Name: plan.Name.ValueString()}
	if s := plan.Scope.ValueString(); s != "" {
		scope := client.APIKeyCreateScope(s)
		in.Scope = &scope
	}
	if !plan.ExpiresAt.IsNull() {
		t, err := time.Parse(time.RFC3339, plan.ExpiresAt.ValueString())
		if err != nil { // the validator caught this at plan; kept for safety
			resp.Diagnostics.AddAttributeError(path.Root("expires_at"), "Invalid expires_at", err.Error())
			return
		}
		in.ExpiresAt = &t
	}
	k, err := r.data.client.CreateAPIKey(ctx, org, in)
	if err != nil {
		apiErrorAt(&resp.Diagnostics, "Error creating API key", err, apiKeyFields)
		return
	}
	if k.Key == nil {
		// The key exists but its secret is lost: revoke it rather than
		// leave an unusable key behind.
		_ = r.data.client.RevokeAPIKey(ctx, org, k.Id)
		resp.Diagnostics.AddError("Error creating API key", "The API made key "+k.Id+" but returned no secret; it was revoked. Try again.")
		return
	}
	plan.Key = types.StringValue(*k.Key)
	applyAPIKey(&plan, k)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// stateAndOrg reads the key's state and the provider's org; false when
// either is missing (a diagnostic says which) or the provider is not
// configured.
func (r *apiKeyResource) stateAndOrg(ctx context.Context, st tfsdk.State, diags *diag.Diagnostics) (apiKeyModel, string, bool) {
	var state apiKeyModel
	diags.Append(st.Get(ctx, &state)...)
	if diags.HasError() || r.data == nil {
		return state, "", false
	}
	org, ok := r.data.requireOrg(diags)
	return state, org, ok
}

// Read finds the key in the org's list (there is no GET of one key): a key
// not listed (revoked) or past its expires_at is removed from state.
func (r *apiKeyResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, org, ok := r.stateAndOrg(ctx, req.State, &resp.Diagnostics)
	if !ok {
		return
	}
	id := state.ID.ValueString()
	keys, err := r.data.client.ListAPIKeys(ctx, org)
	if err != nil && !client.IsNotFound(err) {
		apiError(&resp.Diagnostics, "Error reading API keys", err)
		return
	}
	for i := range keys {
		if keys[i].Id == id && keys[i].ExpiresAt != nil && !keys[i].ExpiresAt.After(time.Now()) {
			// The API lists expired keys, but they are refused: gone for Terraform.
			break
		}
		if keys[i].Id == id {
			applyAPIKey(&state, &keys[i])
			resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
			return
		}
	}
	resp.Diagnostics.AddWarning("API key no longer exists",
		fmt.Sprintf("API key %s of org %s was revoked or has expired outside Terraform; it is removed from the state and the next plan creates a new one.", id, org))
	resp.State.RemoveResource(ctx)
}

// Update is never called with a change (every argument replaces the key);
// it keeps the state as it is.
func (r *apiKeyResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var state apiKeyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *apiKeyResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, org, ok := r.stateAndOrg(ctx, req.State, &resp.Diagnostics)
	if !ok {
		return
	}
	if err := r.data.client.RevokeAPIKey(ctx, org, state.ID.ValueString()); err != nil && !client.IsNotFound(err) {
		apiError(&resp.Diagnostics, "Error revoking API key", err)
	}
}

// ImportState adopts a key by id; its secret cannot be read back, so key
// stays null.
func (r *apiKeyResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// rfc3339Validator checks at plan that a string is an RFC 3339 time.
type rfc3339Validator struct{}

func (rfc3339Validator) Description(context.Context) string {
	return "value must be an RFC 3339 time, such as 2030-01-02T15:04:05Z"
}

func (v rfc3339Validator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v rfc3339Validator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := time.Parse(time.RFC3339, req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid RFC 3339 time",
			fmt.Sprintf("Attribute %s %s, got %q.", req.Path, v.Description(ctx), req.ConfigValue.ValueString()))
	}
}
