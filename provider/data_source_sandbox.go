package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

var (
	_ datasource.DataSource              = (*sandboxDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*sandboxDataSource)(nil)
)

// NewSandboxDataSource returns the dreadnode_sandbox data source.
func NewSandboxDataSource() datasource.DataSource { return &sandboxDataSource{} }

type sandboxDataSource struct {
	data *providerData
}

// sandboxDataModel is one sandbox as data sources report it.
type sandboxDataModel struct {
	ID          types.String `tfsdk:"id"`
	Template    types.String `tfsdk:"template"`
	State       types.String `tfsdk:"state"`
	StartedAt   types.String `tfsdk:"started_at"`
	EndAt       types.String `tfsdk:"end_at"`
	CPUCount    types.Int64  `tfsdk:"cpu_count"`
	MemoryMB    types.Int64  `tfsdk:"memory_mb"`
	Metadata    types.Map    `tfsdk:"metadata"`
	EnvdURL     types.String `tfsdk:"envd_url"`
	ServiceURLs types.Map    `tfsdk:"service_urls"`
	Diagnostic  types.String `tfsdk:"diagnostic"`
}

var sandboxDataAttrTypes = map[string]attr.Type{
	"id":           types.StringType,
	"template":     types.StringType,
	"state":        types.StringType,
	"started_at":   types.StringType,
	"end_at":       types.StringType,
	"cpu_count":    types.Int64Type,
	"memory_mb":    types.Int64Type,
	"metadata":     types.MapType{ElemType: types.StringType},
	"envd_url":     types.StringType,
	"service_urls": types.MapType{ElemType: endpointObjectType},
	"diagnostic":   types.StringType,
}

func sandboxData(sb *client.Sandbox, diags *diag.Diagnostics) sandboxDataModel {
	md := sb.Metadata
	if md == nil {
		md = map[string]string{}
	}
	mdv, d := types.MapValueFrom(context.Background(), types.StringType, md)
	diags.Append(d...)
	return sandboxDataModel{
		ID:          types.StringValue(sb.SandboxID),
		Template:    stringOrNull(sb.TemplateID),
		State:       types.StringValue(sb.State),
		StartedAt:   stringOrNull(client.TimeText(sb.StartedAt)),
		EndAt:       stringOrNull(client.TimeText(sb.EndAt)),
		CPUCount:    types.Int64Value(int64(sb.CPUCount)),
		MemoryMB:    types.Int64Value(int64(sb.MemoryMB)),
		Metadata:    mdv,
		EnvdURL:     stringOrNull(sb.EnvdURL),
		ServiceURLs: endpointsValue(sb.ServiceURLs, diags),
		Diagnostic:  stringOrNull(sb.DiagnosticText()),
	}
}

// sandboxDataAttributes are the attributes of one sandbox; idRequired makes
// id the data source's argument.
func sandboxDataAttributes(idRequired bool) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id":         schema.StringAttribute{Required: idRequired, Computed: !idRequired, MarkdownDescription: "The sandbox id."},
		"template":   schema.StringAttribute{Computed: true, MarkdownDescription: "Template the sandbox was created from."},
		"state":      schema.StringAttribute{Computed: true, MarkdownDescription: "Public state: `starting`, `running`, `paused`, `completed`, `failed` or `deleted`."},
		"started_at": schema.StringAttribute{Computed: true, MarkdownDescription: "When the sandbox started (RFC 3339)."},
		"end_at":     schema.StringAttribute{Computed: true, MarkdownDescription: "When the sandbox's timeout runs out (RFC 3339)."},
		"cpu_count":  schema.Int64Attribute{Computed: true, MarkdownDescription: "CPUs granted."},
		"memory_mb":  schema.Int64Attribute{Computed: true, MarkdownDescription: "Memory granted, in MiB."},
		"metadata":   schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "User metadata."},
		"envd_url":   schema.StringAttribute{Computed: true, MarkdownDescription: "URL of the in-sandbox daemon."},
		"service_urls": schema.MapNestedAttribute{
			Computed:            true,
			MarkdownDescription: "Where the sandbox's services are reachable.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"url":  schema.StringAttribute{Computed: true, MarkdownDescription: "URL of the service."},
				"host": schema.StringAttribute{Computed: true, MarkdownDescription: "Host of the service."},
				"port": schema.Int64Attribute{Computed: true, MarkdownDescription: "Port of the service."},
			}},
		},
		"diagnostic": schema.StringAttribute{Computed: true, MarkdownDescription: "Why the sandbox failed, when it did."},
	}
}

func (d *sandboxDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox"
}

func (d *sandboxDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads one sandbox by id (`GET /sandboxes/{id}`). The access token is never shown here.",
		Attributes:          sandboxDataAttributes(true),
	}
}

func (d *sandboxDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (d *sandboxDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg sandboxDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || d.data == nil {
		return
	}
	sb, err := d.data.client.GetSandbox(ctx, cfg.ID.ValueString())
	if err != nil {
		if client.IsNotFound(err) {
			resp.Diagnostics.AddAttributeError(pathRoot("id"), "Sandbox not found", fmt.Sprintf("No sandbox %q: %s", cfg.ID.ValueString(), err))
			return
		}
		apiError(&resp.Diagnostics, "Error reading sandbox", err)
		return
	}
	if sb.SandboxID == "" {
		sb.SandboxID = cfg.ID.ValueString()
	}
	out := sandboxData(sb, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &out)...)
}
