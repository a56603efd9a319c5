package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

var (
	_ ephemeral.EphemeralResource              = (*sandboxConnectionEphemeral)(nil)
	_ ephemeral.EphemeralResourceWithConfigure = (*sandboxConnectionEphemeral)(nil)
)

// NewSandboxConnectionEphemeral returns the dreadnode_sandbox_connection
// ephemeral resource.
func NewSandboxConnectionEphemeral() ephemeral.EphemeralResource {
	return &sandboxConnectionEphemeral{}
}

type sandboxConnectionEphemeral struct {
	data *providerData
}

type sandboxConnectionModel struct {
	SandboxID   types.String `tfsdk:"sandbox_id"`
	Timeout     types.Int64  `tfsdk:"timeout"`
	AccessToken types.String `tfsdk:"access_token"`
	EnvdURL     types.String `tfsdk:"envd_url"`
	ServiceURLs types.Map    `tfsdk:"service_urls"`
	EndAt       types.String `tfsdk:"end_at"`
	State       types.String `tfsdk:"state"`
}

func (e *sandboxConnectionEphemeral) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox_connection"
}

func (e *sandboxConnectionEphemeral) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Connects to a running sandbox (`POST /sandboxes/{id}/connect`) and returns a fresh access token " +
			"that Terraform never stores in plan or state (Terraform 1.10 or later). Use it in provider blocks, provisioners, " +
			"write-only arguments or ephemeral outputs.\n\n" +
			"Each Terraform run that needs it connects again: every connect issues a new token and revokes the previous one, " +
			"including the `access_token` a `dreadnode_sandbox` resource holds in its state. Connecting also extends the " +
			"sandbox's lifetime to at least now + `timeout`. A paused sandbox is refused (connecting would resume it behind " +
			"the back of the `paused` argument).\n\n" +
			"There is no ephemeral counterpart for a task environment's `execute_token`: the server returns that token only " +
			"in the create response and never again.",
		Attributes: map[string]schema.Attribute{
			"sandbox_id": schema.StringAttribute{
				MarkdownDescription: "The sandbox to connect to (e.g. `dreadnode_sandbox.example.id`).",
				Required:            true,
			},
			"timeout": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("Seconds from now the sandbox lives at least (%d to %d). The sandbox's own timeout when unset.", apitypes.ConnectSandboxTimeoutMinimum, apitypes.ConnectSandboxTimeoutMaximum),
				Optional:            true,
				Validators:          []validator.Int64{int64validator.Between(apitypes.ConnectSandboxTimeoutMinimum, apitypes.ConnectSandboxTimeoutMaximum)},
			},
			"access_token": schema.StringAttribute{
				MarkdownDescription: "A fresh token for exec, files and the traffic router (header `X-Access-Token`).",
				Computed:            true,
				Sensitive:           true,
			},
			"envd_url": schema.StringAttribute{
				MarkdownDescription: "URL of the in-sandbox daemon.",
				Computed:            true,
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
			},
			"end_at": schema.StringAttribute{
				MarkdownDescription: "When the sandbox's timeout runs out after connecting (RFC 3339).",
				Computed:            true,
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "State of the sandbox after connecting (`running`).",
				Computed:            true,
			},
		},
	}
}

func (e *sandboxConnectionEphemeral) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	e.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (e *sandboxConnectionEphemeral) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m sandboxConnectionModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || e.data == nil {
		return
	}
	id := m.SandboxID.ValueString()
	sb, err := e.data.client.GetSandbox(ctx, id)
	if err != nil {
		apiError(&resp.Diagnostics, "Error reading sandbox "+id, err)
		return
	}
	switch {
	case sb.State == client.SandboxPaused:
		resp.Diagnostics.AddError("Sandbox "+id+" is paused",
			"Connecting would resume it. Resume it first (paused = false on its dreadnode_sandbox resource), then connect.")
		return
	case client.SandboxGone(sb.State):
		resp.Diagnostics.AddError("Sandbox "+id+" is "+sb.State, goneDetail(sb))
		return
	}
	timeout := m.Timeout.ValueInt64()
	if m.Timeout.IsNull() {
		timeout = sandboxDefaultTimeoutSec
		if sb.Timeout > 0 {
			timeout = int64(sb.Timeout)
		}
	}
	conn, err := e.data.client.ConnectSandbox(ctx, id, timeout)
	if err != nil {
		apiError(&resp.Diagnostics, "Error connecting to sandbox "+id, err)
		return
	}
	if conn.AccessToken == "" {
		resp.Diagnostics.AddError("Sandbox connection without an access token",
			fmt.Sprintf("POST /sandboxes/%s/connect answered without an accessToken. Please report this to the Dreadnode backend's maintainers.", id))
		return
	}
	m.AccessToken = types.StringValue(conn.AccessToken)
	m.EnvdURL = stringOrNull(conn.EnvdURL)
	m.ServiceURLs = endpointsValue(conn.ServiceURLs, &resp.Diagnostics)
	m.EndAt = stringOrNull(client.TimeText(conn.EndAt))
	m.State = types.StringValue(conn.State)
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
}
