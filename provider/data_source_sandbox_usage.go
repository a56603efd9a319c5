package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ datasource.DataSource              = (*sandboxUsageDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*sandboxUsageDataSource)(nil)
)

// NewSandboxUsageDataSource returns the dreadnode_sandbox_usage data source.
func NewSandboxUsageDataSource() datasource.DataSource { return &sandboxUsageDataSource{} }

type sandboxUsageDataSource struct {
	data *providerData
}

type sandboxUsageModel struct {
	ID                  types.String  `tfsdk:"id"`
	TotalRuntimeSeconds types.Float64 `tfsdk:"total_runtime_seconds"`
	SessionsCount       types.Int64   `tfsdk:"sessions_count"`
	CurrentMonthSeconds types.Float64 `tfsdk:"current_month_seconds"`
}

func (d *sandboxUsageDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox_usage"
}

func (d *sandboxUsageDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Aggregate sandbox usage of the organization (`GET /api/v1/org/{org}/sandboxes/usage`).",
		Attributes: map[string]schema.Attribute{
			"id":                    schema.StringAttribute{Computed: true, MarkdownDescription: "The organization."},
			"total_runtime_seconds": schema.Float64Attribute{Computed: true, MarkdownDescription: "Runtime of all sandboxes ever, in seconds."},
			"sessions_count":        schema.Int64Attribute{Computed: true, MarkdownDescription: "Number of sandbox sessions."},
			"current_month_seconds": schema.Float64Attribute{Computed: true, MarkdownDescription: "Runtime in the current calendar month, in seconds."},
		},
	}
}

func (d *sandboxUsageDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (d *sandboxUsageDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	if d.data == nil {
		return
	}
	org, ok := d.data.requireOrg(&resp.Diagnostics)
	if !ok {
		return
	}
	u, err := d.data.client.SandboxUsage(ctx, org)
	if err != nil {
		apiError(&resp.Diagnostics, "Error reading sandbox usage", err)
		return
	}
	out := sandboxUsageModel{
		ID:                  types.StringValue(org),
		TotalRuntimeSeconds: types.Float64Value(u.TotalRuntimeSeconds),
		SessionsCount:       types.Int64Value(u.SessionsCount),
		CurrentMonthSeconds: types.Float64Value(u.CurrentMonthSeconds),
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &out)...)
}
