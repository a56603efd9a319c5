package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

const volumeDefaultTimeout = 2 * time.Minute

// volumeNamePattern is the server's syntax of a volume name (NewVolume).
var volumeNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// volumeFields are the fields of POST /volumes.
var volumeFields = fieldPaths{"name": "name"}

var (
	_ resource.Resource                = (*volumeResource)(nil)
	_ resource.ResourceWithConfigure   = (*volumeResource)(nil)
	_ resource.ResourceWithImportState = (*volumeResource)(nil)
	_ resource.ResourceWithIdentity    = (*volumeResource)(nil)
)

// NewVolumeResource returns the dreadnode_volume resource.
func NewVolumeResource() resource.Resource { return &volumeResource{} }

type volumeResource struct {
	data *providerData
}

type volumeModel struct {
	ID        types.String   `tfsdk:"id"`
	Name      types.String   `tfsdk:"name"`
	SizeBytes types.Int64    `tfsdk:"size_bytes"`
	CreatedAt types.String   `tfsdk:"created_at"`
	Timeouts  timeouts.Value `tfsdk:"timeouts"`
}

func (r *volumeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_volume"
}

func (r *volumeResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A named volume of the provider's organization (API `/volumes`): persistent until deleted, " +
			"mountable by several sandboxes of the organization at once (create's `volumeMounts` with `shared: true`). " +
			"Another organization cannot see or mount it.\n\n" +
			"Changing `name` replaces the volume, and its contents are lost. A volume deleted outside Terraform is removed " +
			"from state with a warning, so the next plan creates a new (empty) one.\n\n" +
			"Destroying a volume that a sandbox still mounts fails: the API refuses it (409) and names the sandboxes; " +
			"delete them (or let them end) and destroy again.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The volume id (`volumeID`).",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("The volume's name, unique in the organization (%d to %d letters, digits, `_` and `-`): "+
					"sandboxes mount it by this name. Changing it replaces the volume (its contents are lost).",
					apitypes.NewVolumeNameMinLength, apitypes.NewVolumeNameMaxLength),
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{
					stringvalidator.LengthBetween(apitypes.NewVolumeNameMinLength, apitypes.NewVolumeNameMaxLength),
					stringvalidator.RegexMatches(volumeNamePattern, "must be letters, digits, '_' and '-'"),
				},
			},
			"size_bytes": schema.Int64Attribute{
				MarkdownDescription: "Disk bytes the volume uses, as the API last measured them (at most a minute old; " +
					"0 before the first measurement). Refreshed at every read.",
				Computed:      true,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the volume was made (RFC 3339).",
				Computed:            true,
				PlanModifiers:       keep,
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Read: true, Delete: true}),
		},
	}
}

func (r *volumeResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (r *volumeResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = idIdentitySchema("The volume id.")
}

func applyVolume(m *volumeModel, v *client.Volume) {
	m.ID = types.StringValue(v.VolumeID)
	m.Name = types.StringValue(v.Name)
	m.SizeBytes = types.Int64Value(v.SizeBytes)
	m.CreatedAt = types.StringValue(v.CreatedAt.UTC().Format(time.RFC3339))
}

func (r *volumeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan volumeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	limit, d := plan.Timeouts.Create(ctx, volumeDefaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	v, err := r.data.client.CreateVolume(ctx, client.VolumeCreate{Name: plan.Name.ValueString()})
	if err != nil {
		if client.IsConflict(err) {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Error creating volume",
				err.Error()+"\n\nChoose another name, or adopt the existing volume with terraform import (its id is in `dn volume list`).")
			return
		}
		apiErrorAt(&resp.Diagnostics, "Error creating volume", err, volumeFields)
		return
	}
	tflog.Info(ctx, "created volume", map[string]any{"id": v.VolumeID, "name": v.Name})
	applyVolume(&plan, v)
	setIDIdentity(ctx, resp.Identity, v.VolumeID, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Read removes a volume the API no longer has (deleted outside Terraform).
func (r *volumeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state volumeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	limit, d := state.Timeouts.Read(ctx, volumeDefaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	id := state.ID.ValueString()
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	v, err := r.data.client.GetVolume(ctx, id)
	switch {
	case client.IsNotFound(err):
		resp.Diagnostics.AddWarning("Volume no longer exists",
			fmt.Sprintf("Volume %s (%s) was not found: it was deleted outside Terraform. It is removed from the state and the next plan creates a new, empty one.",
				id, state.Name.ValueString()))
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		apiError(&resp.Diagnostics, "Error reading volume", err)
		return
	}
	applyVolume(&state, v)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update is never called with a change (name replaces the volume); it
// keeps the state, with the new timeouts.
func (r *volumeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state volumeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	state.Timeouts = plan.Timeouts
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Delete deletes the volume. A volume still mounted is refused by the API
// (409, naming the sandboxes); the diagnostic says what to do.
func (r *volumeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state volumeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	limit, d := state.Timeouts.Delete(ctx, volumeDefaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	id := state.ID.ValueString()
	err := r.deleteVolume(ctx, id)
	switch {
	case err == nil, client.IsNotFound(err):
		return
	case client.IsConflict(err):
		resp.Diagnostics.AddError("Volume is still mounted",
			fmt.Sprintf("The API refused to delete volume %s (%s) because sandboxes that have not ended mount it: %s\n\n"+
				"Delete those sandboxes (terraform destroy of their resources, or dn sandbox delete <id>) or wait until they end, "+
				"then run terraform destroy again. The volume and its contents are kept until then.",
				id, state.Name.ValueString(), detailOf(err)))
	default:
		apiError(&resp.Diagnostics, "Error deleting volume", err)
	}
}

// volumeBusyRetry is how long Delete retries a 409: a sandbox that mounts
// the volume may be being deleted in the same run (the API refuses until
// its container is removed).
const volumeBusyRetry = 30 * time.Second

// deleteVolume deletes volume id, retrying a 409 for volumeBusyRetry (ctx
// bounds it); the last answer is returned.
func (r *volumeResource) deleteVolume(ctx context.Context, id string) error {
	deadline := time.Now().Add(volumeBusyRetry)
	b := client.Doubling(time.Second, 5*time.Second)
	for {
		err := r.data.client.DeleteVolume(ctx, id)
		if !client.IsConflict(err) || time.Now().After(deadline) {
			return err
		}
		tflog.Debug(ctx, "volume still mounted; retrying the delete", map[string]any{"id": id, "error": err.Error()})
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// ImportState adopts a volume by id (dn volume list shows it).
func (r *volumeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
}

// detailOf is the server's sentence in err (its error envelope's detail),
// else err's text.
func detailOf(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Envelope.Detail != "" {
		return ae.Envelope.Detail
	}
	return err.Error()
}
