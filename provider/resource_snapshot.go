package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
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

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

const (
	// A commit walks the sandbox's writable layer: minutes for gigabytes.
	snapshotDefaultCreateTimeout = 10 * time.Minute
	snapshotDefaultTimeout       = 2 * time.Minute
	// snapshotDefaultTag is the tag a name without ":tag" means.
	snapshotDefaultTag = "default"
)

// snapshotNamePattern is the server's syntax of a snapshot name: an alias
// (lowercase letters, digits, '-', '_') and an optional ":tag" (also '.').
var snapshotNamePattern = regexp.MustCompile(`^[a-z0-9_-]+(:[a-z0-9_.-]+)?$`)

// snapshotFields are the fields of POST /sandboxes/{id}/snapshots.
var snapshotFields = fieldPaths{"name": "name"}

// snapshotLocks serialises the snapshots of one sandbox taken by this
// provider process: the API refuses (409) a second snapshot of a sandbox
// while one is taken, and Terraform creates independent resources in
// parallel.
var snapshotLocks sync.Map // sandbox id → *sync.Mutex

func lockSnapshotsOf(sandboxID string) func() {
	m, _ := snapshotLocks.LoadOrStore(sandboxID, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

var (
	_ resource.Resource                = (*snapshotResource)(nil)
	_ resource.ResourceWithConfigure   = (*snapshotResource)(nil)
	_ resource.ResourceWithImportState = (*snapshotResource)(nil)
	_ resource.ResourceWithIdentity    = (*snapshotResource)(nil)
)

// NewSnapshotResource returns the dreadnode_snapshot resource.
func NewSnapshotResource() resource.Resource { return &snapshotResource{} }

type snapshotResource struct {
	data *providerData
}

type snapshotModel struct {
	ID         types.String   `tfsdk:"id"`
	SandboxID  types.String   `tfsdk:"sandbox_id"`
	Name       types.String   `tfsdk:"name"`
	TemplateID types.String   `tfsdk:"template_id"`
	SnapshotID types.String   `tfsdk:"snapshot_id"`
	BuildID    types.String   `tfsdk:"build_id"`
	SizeBytes  types.Int64    `tfsdk:"size_bytes"`
	Parent     types.String   `tfsdk:"parent"`
	CreatedAt  types.String   `tfsdk:"created_at"`
	Timeouts   timeouts.Value `tfsdk:"timeouts"`
}

func (r *snapshotResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_snapshot"
}

func (r *snapshotResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A snapshot of a sandbox (API `POST /sandboxes/{id}/snapshots`): its filesystem (image and writable layer) " +
			"committed to a template of the provider's organization, which sandboxes of the organization start from " +
			"(`dreadnode_sandbox`'s `template = dreadnode_snapshot.x.snapshot_id`). Memory and processes are not kept: a sandbox " +
			"started from a snapshot runs its command again.\n\n" +
			"The sandbox must be running or paused; it is paused only while the engine commits and keeps running. Create " +
			"answers once the snapshot is made. Changing `sandbox_id` or `name` replaces the snapshot. Destroying it deletes " +
			"the snapshot's template with every build of it and their images.\n\n" +
			"A `name` the organization already gave a snapshot makes a new build of that snapshot template (its tag moves to " +
			"the new build): two resources with the same name share one template, and destroying either deletes it. Give each " +
			"resource its own name, or none.\n\n" +
			"A snapshot deleted outside Terraform is removed from state with a warning, so the next plan takes a new one " +
			"(from the sandbox as it is then).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The snapshot's template id (`templateID`), as `template_id`.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"sandbox_id": schema.StringAttribute{
				MarkdownDescription: "The sandbox to snapshot, running or paused (for example `dreadnode_sandbox.x.id`). " +
					"Changing it replaces the snapshot.",
				Required:      true,
				PlanModifiers: []planmodifier.String{replaceUnlessAdopting()},
				Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The snapshot's name, `alias[:tag]` (lowercase letters, digits, `-` and `_`; a tag may also " +
					"hold `.`): sandboxes may start from it by name. Unset: an unnamed snapshot, started from by `template_id`. " +
					"Changing it replaces the snapshot.",
				Optional:      true,
				PlanModifiers: []planmodifier.String{replaceUnlessAdopting()},
				Validators: []validator.String{stringvalidator.RegexMatches(snapshotNamePattern,
					"must be alias[:tag]: lowercase letters, digits, '-' and '_' (a tag may also hold '.')")},
			},
			"template_id": schema.StringAttribute{
				MarkdownDescription: "The snapshot's template. As `template` of `dreadnode_sandbox` it starts from the template's " +
					"default tag: this snapshot when `name` has no `:tag` (or is unset); otherwise use `snapshot_id`.",
				Computed:      true,
				PlanModifiers: keep,
			},
			"snapshot_id": schema.StringAttribute{
				MarkdownDescription: "The snapshot's id as E2B shows it, `<alias or template id>:<tag>`: what `template` of " +
					"`dreadnode_sandbox` takes to start from this snapshot, whatever its name.",
				Computed:      true,
				PlanModifiers: keep,
			},
			"build_id": schema.StringAttribute{
				MarkdownDescription: "The build of the template this snapshot made (a later snapshot of the same `name` makes another).",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"size_bytes": schema.Int64Attribute{
				MarkdownDescription: "Bytes of the committed image.",
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"parent": schema.StringAttribute{
				MarkdownDescription: "The template of the sandbox the snapshot was taken from.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the snapshot was made (RFC 3339).",
				Computed:            true,
				PlanModifiers:       keep,
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Read: true, Delete: true}),
		},
	}
}

func (r *snapshotResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (r *snapshotResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = idIdentitySchema("The snapshot's template id.")
}

// applySnapshot copies what the API reports into the model; sandbox_id and
// name are set only when null (after an import), as written otherwise.
func applySnapshot(m *snapshotModel, sn *client.Snapshot) {
	m.ID = types.StringValue(sn.TemplateID)
	m.TemplateID = types.StringValue(sn.TemplateID)
	m.SnapshotID = types.StringValue(sn.SnapshotID)
	m.BuildID = types.StringValue(sn.BuildID)
	m.SizeBytes = types.Int64Value(sn.SizeBytes)
	m.Parent = stringOrNull(sn.Parent)
	m.CreatedAt = types.StringValue(sn.CreatedAt.UTC().Format(time.RFC3339))
	if m.SandboxID.IsNull() || m.SandboxID.IsUnknown() {
		m.SandboxID = stringOrNull(sn.SourceSandboxID)
	}
	if (m.Name.IsNull() || m.Name.IsUnknown()) && len(sn.Names) > 0 {
		name := sn.Names[0]
		if sn.Tag != "" && sn.Tag != snapshotDefaultTag {
			name += ":" + sn.Tag
		}
		m.Name = types.StringValue(name)
	} else if m.Name.IsUnknown() {
		m.Name = types.StringNull()
	}
}

// lookupRef is the name the snapshot is read back by: its template id,
// with the tag its name gives (that tag's build), else its newest build.
func (m *snapshotModel) lookupRef() string {
	ref := m.ID.ValueString()
	if _, tag, ok := strings.Cut(m.Name.ValueString(), ":"); ok && tag != "" {
		ref += ":" + tag
	}
	return ref
}

func (r *snapshotResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan snapshotModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	limit, d := plan.Timeouts.Create(ctx, snapshotDefaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	sandboxID := plan.SandboxID.ValueString()
	unlock := lockSnapshotsOf(sandboxID)
	sn, err := r.data.client.CreateSnapshot(ctx, sandboxID, client.SnapshotCreate{Name: plan.Name.ValueString()})
	unlock()
	if err != nil {
		switch {
		case client.IsNotFound(err):
			resp.Diagnostics.AddAttributeError(path.Root("sandbox_id"), "Error creating snapshot",
				err.Error()+"\n\nThe sandbox is unknown to the organization or has ended: snapshot a running or paused sandbox.")
		case client.IsConflict(err):
			resp.Diagnostics.AddError("Error creating snapshot",
				err.Error()+"\n\nA sandbox is snapshotted once it runs (or is paused), one snapshot at a time; a name must not be "+
					"a template's that is not a snapshot. Fix what the API says and apply again.")
		default:
			apiErrorAt(&resp.Diagnostics, "Error creating snapshot", err, snapshotFields)
		}
		return
	}
	tflog.Info(ctx, "created snapshot", map[string]any{"id": sn.TemplateID, "snapshot_id": sn.SnapshotID, "sandbox_id": sandboxID})

	// Save the id before reading the snapshot back, so a failed read leaves
	// a resource in state that terraform destroy deletes.
	applySnapshot(&plan, sn)
	setIDIdentity(ctx, resp.Identity, sn.TemplateID, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The answer comes once the image is committed and the build is
	// ready; the list shows it from then on. Read it back as refresh will,
	// so the next plan is empty.
	cur, err := r.waitListed(ctx, plan.lookupRef())
	if err != nil {
		resp.Diagnostics.AddError("Error reading the new snapshot",
			fmt.Sprintf("Snapshot %s was made but could not be read back: %s\n\nIt is kept in state; the next refresh reads it again, and terraform destroy deletes it.",
				sn.TemplateID, err))
		return
	}
	applySnapshot(&plan, cur)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// waitListed polls the org's snapshots until ref is listed (ctx bounds it).
func (r *snapshotResource) waitListed(ctx context.Context, ref string) (*client.Snapshot, error) {
	b := client.Doubling(sandboxPollInitial, sandboxPollMax)
	for {
		sn, err := r.data.client.GetSnapshot(ctx, ref)
		if err == nil || !client.IsNotFound(err) {
			return sn, err
		}
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (still not listed: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Read removes a snapshot the API no longer lists (deleted outside Terraform).
func (r *snapshotResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state snapshotModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	limit, d := state.Timeouts.Read(ctx, snapshotDefaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	id := state.ID.ValueString()
	setIDIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	sn, err := r.data.client.GetSnapshot(ctx, state.lookupRef())
	switch {
	case client.IsNotFound(err):
		resp.Diagnostics.AddWarning("Snapshot no longer exists",
			fmt.Sprintf("Snapshot %s was not found: it was deleted outside Terraform. It is removed from the state and the next plan takes a new one.", id))
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		apiError(&resp.Diagnostics, "Error reading snapshot", err)
		return
	}
	applySnapshot(&state, sn)
	setIDIdentity(ctx, resp.Identity, sn.TemplateID, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update is called only for timeouts or to adopt arguments after an
// import (every other change replaces the snapshot).
func (r *snapshotResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state snapshotModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	state.Timeouts = plan.Timeouts
	state.SandboxID = plan.SandboxID
	state.Name = plan.Name
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, nil)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *snapshotResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state snapshotModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	limit, d := state.Timeouts.Delete(ctx, snapshotDefaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := r.data.client.DeleteSnapshot(ctx, state.ID.ValueString()); err != nil && !client.IsNotFound(err) {
		apiError(&resp.Diagnostics, "Error deleting snapshot", err)
	}
}

// ImportState adopts a snapshot by its template id (dn snapshot list shows
// it); sandbox_id and name are read back from the API.
func (r *snapshotResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateImportedKey, []byte(`true`))...)
}
