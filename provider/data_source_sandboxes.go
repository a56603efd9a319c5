package provider

import (
	"context"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ datasource.DataSource              = (*sandboxesDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*sandboxesDataSource)(nil)
)

// NewSandboxesDataSource returns the dreadnode_sandboxes data source.
func NewSandboxesDataSource() datasource.DataSource { return &sandboxesDataSource{} }

type sandboxesDataSource struct {
	data *providerData
}

type sandboxesModel struct {
	ID        types.String `tfsdk:"id"`
	State     types.List   `tfsdk:"state"`
	Metadata  types.Map    `tfsdk:"metadata"`
	IDs       types.List   `tfsdk:"ids"`
	Sandboxes types.List   `tfsdk:"sandboxes"`
}

func pathRoot(name string) path.Path { return path.Root(name) }

func (d *sandboxesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandboxes"
}

func (d *sandboxesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the organization's sandboxes (`GET /sandboxes`), filtered by state and metadata, sorted by id.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "An identifier of this query (the filters)."},
			"state": schema.ListAttribute{
				Optional:            true,
				ElementType:         types.StringType,
				MarkdownDescription: "Only sandboxes in one of these states (`starting`, `running`, `paused`, `completed`, `failed`, `deleted`). When unset, the live ones: `starting`, `running` and `paused`.",
			},
			"metadata": schema.MapAttribute{
				Optional:            true,
				ElementType:         types.StringType,
				MarkdownDescription: "Only sandboxes whose metadata holds all these key/value pairs.",
			},
			"ids": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Ids of the matching sandboxes."},
			"sandboxes": schema.ListNestedAttribute{
				Computed:            true,
				MarkdownDescription: "The matching sandboxes.",
				NestedObject:        schema.NestedAttributeObject{Attributes: sandboxDataAttributes(false)},
			},
		},
	}
}

func (d *sandboxesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (d *sandboxesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg sandboxesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || d.data == nil {
		return
	}
	states := stringList(ctx, cfg.State, &resp.Diagnostics)
	md := stringMap(ctx, cfg.Metadata, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	list, err := d.data.client.ListSandboxes(ctx, states, md)
	if err != nil {
		apiError(&resp.Diagnostics, "Error listing sandboxes", err)
		return
	}

	// Filter here too, so the answer is right whatever the server supports.
	wantState := map[string]bool{}
	for _, s := range states {
		wantState[s] = true
	}
	var items []sandboxDataModel
	var ids []string
	seen := map[string]bool{}
	sort.Slice(list, func(i, j int) bool { return list[i].SandboxID < list[j].SandboxID })
	for i := range list {
		sb := &list[i]
		if seen[sb.SandboxID] || (len(wantState) > 0 && !wantState[sb.State]) {
			continue
		}
		match := true
		for k, v := range md {
			if got, ok := sb.Metadata[k]; !ok || got != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		seen[sb.SandboxID] = true
		items = append(items, sandboxData(sb, &resp.Diagnostics))
		ids = append(ids, sb.SandboxID)
	}

	idsV, diags := types.ListValueFrom(ctx, types.StringType, nonNil(ids))
	resp.Diagnostics.Append(diags...)
	sbV, diags := types.ListValueFrom(ctx, types.ObjectType{AttrTypes: sandboxDataAttrTypes}, nonNilModels(items))
	resp.Diagnostics.Append(diags...)

	var key []string
	key = append(key, "state="+strings.Join(states, ","))
	for _, k := range sortedKeys(md) {
		key = append(key, "metadata."+k+"="+md[k])
	}
	cfg.ID = types.StringValue(strings.Join(key, ";"))
	cfg.IDs = idsV
	cfg.Sandboxes = sbV
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilModels(s []sandboxDataModel) []sandboxDataModel {
	if s == nil {
		return []sandboxDataModel{}
	}
	return s
}
