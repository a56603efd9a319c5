package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

var (
	_ datasource.DataSource              = (*taskDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*taskDataSource)(nil)
)

// NewTaskDataSource returns the dreadnode_task data source.
func NewTaskDataSource() datasource.DataSource { return &taskDataSource{} }

type taskDataSource struct {
	data *providerData
}

type taskModel struct {
	Ref          types.String `tfsdk:"ref"`
	ID           types.String `tfsdk:"id"`
	Name         types.String `tfsdk:"name"`
	Org          types.String `tfsdk:"org"`
	Version      types.String `tfsdk:"version"`
	Description  types.String `tfsdk:"description"`
	Instruction  types.String `tfsdk:"instruction"`
	Inputs       types.Map    `tfsdk:"inputs"`
	Services     types.List   `tfsdk:"services"`
	ServicePorts types.Map    `tfsdk:"service_ports"`
}

var taskInputAttrTypes = map[string]attr.Type{"default": types.StringType, "description": types.StringType}

func (d *taskDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_task"
}

func (d *taskDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Looks up a task of the catalog by reference (`GET /api/v1/org/{org}/tasks/{ref}`). " +
			"Without a version, the newest version of the task is chosen.",
		Attributes: map[string]schema.Attribute{
			"ref":         schema.StringAttribute{Required: true, MarkdownDescription: "Task reference: `[org/]name[@version]`."},
			"id":          schema.StringAttribute{Computed: true, MarkdownDescription: "The resolved reference `org/name@version` (without org when the task has none)."},
			"name":        schema.StringAttribute{Computed: true, MarkdownDescription: "Task name."},
			"org":         schema.StringAttribute{Computed: true, MarkdownDescription: "Org that publishes the task, when any."},
			"version":     schema.StringAttribute{Computed: true, MarkdownDescription: "Task version (semver)."},
			"description": schema.StringAttribute{Computed: true, MarkdownDescription: "Task description."},
			"instruction": schema.StringAttribute{Computed: true, MarkdownDescription: "Instruction template (`{{<service>_url}}` etc. are filled in per environment)."},
			"inputs": schema.MapNestedAttribute{
				Computed:            true,
				MarkdownDescription: "Inputs the task accepts, with their defaults.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"default":     schema.StringAttribute{Computed: true, MarkdownDescription: "Default value."},
					"description": schema.StringAttribute{Computed: true, MarkdownDescription: "What the input means."},
				}},
			},
			"services":      schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Services the task exposes (the keys of an environment's `service_urls`), sorted."},
			"service_ports": schema.MapAttribute{Computed: true, ElementType: types.Int64Type, MarkdownDescription: "Container port each exposed service listens on."},
		},
	}
}

func (d *taskDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// parseTaskRef splits [org/]name[@version].
func parseTaskRef(ref string) (org, name, version string) {
	ref = strings.TrimSpace(ref)
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref, version = ref[:i], ref[i+1:]
	}
	if i := strings.Index(ref, "/"); i >= 0 {
		org, ref = ref[:i], ref[i+1:]
	}
	return org, ref, version
}

// findTask picks the task matching ref: same name, same org when given, the
// given version or else the highest one.
func findTask(tasks []client.Task, ref string) (*client.Task, error) {
	org, name, version := parseTaskRef(ref)
	var cands []*client.Task
	for i := range tasks {
		t := &tasks[i]
		tn, to := t.Name, t.Org
		if t.Ref != "" && tn == "" {
			to, tn, _ = parseTaskRef(t.Ref)
		}
		if tn != name || (org != "" && to != org) {
			continue
		}
		if version != "" && strings.TrimPrefix(t.Version, "v") != strings.TrimPrefix(version, "v") {
			continue
		}
		cands = append(cands, t)
	}
	if len(cands) == 0 {
		names := make([]string, 0, len(tasks))
		for _, t := range tasks {
			names = append(names, taskID(&t))
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no task matches %q in the catalog (available: %s)", ref, strings.Join(names, ", "))
	}
	sort.SliceStable(cands, func(i, j int) bool {
		vi, ei := semver.NewVersion(cands[i].Version)
		vj, ej := semver.NewVersion(cands[j].Version)
		if ei != nil || ej != nil {
			return cands[i].Version > cands[j].Version
		}
		return vi.GreaterThan(vj)
	})
	return cands[0], nil
}

func taskID(t *client.Task) string {
	id := t.Name
	if t.Org != "" {
		id = t.Org + "/" + id
	}
	if t.Version != "" {
		id += "@" + t.Version
	}
	return id
}

func (d *taskDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg taskModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || d.data == nil {
		return
	}
	org, ok := d.data.requireOrg(&resp.Diagnostics)
	if !ok {
		return
	}
	ref := strings.TrimSpace(cfg.Ref.ValueString())
	t, err := d.data.client.GetTask(ctx, org, ref)
	switch {
	case client.IsNotFound(err):
		// Name what the catalog has, to help with typos.
		msg := err.Error()
		if tasks, lerr := d.data.client.ListTasks(ctx, org); lerr == nil {
			if _, ferr := findTask(tasks, ref); ferr != nil {
				msg = ferr.Error()
			}
		}
		resp.Diagnostics.AddAttributeError(pathRoot("ref"), "Task not found", msg)
		return
	case err != nil:
		apiError(&resp.Diagnostics, "Error reading task", err)
		return
	}
	if t.Name == "" && t.Ref != "" {
		t.Org, t.Name, _ = parseTaskRef(t.Ref)
	}

	inputs := map[string]attr.Value{}
	for k, in := range t.Inputs {
		obj, diags := types.ObjectValue(taskInputAttrTypes, map[string]attr.Value{
			"default":     types.StringValue(in.Default),
			"description": types.StringValue(in.Description),
		})
		resp.Diagnostics.Append(diags...)
		inputs[k] = obj
	}
	inV, diags := types.MapValue(types.ObjectType{AttrTypes: taskInputAttrTypes}, inputs)
	resp.Diagnostics.Append(diags...)
	names := sortedKeys(t.Services)
	svcV, diags := types.ListValueFrom(ctx, types.StringType, nonNil(names))
	resp.Diagnostics.Append(diags...)
	ports := map[string]int64{}
	for k, p := range t.Services {
		if p > 0 {
			ports[k] = p
		}
	}
	portV, diags := types.MapValueFrom(ctx, types.Int64Type, ports)
	resp.Diagnostics.Append(diags...)

	id := t.Ref
	if id == "" {
		id = taskID(t)
	}
	cfg.ID = types.StringValue(id)
	cfg.Name = types.StringValue(t.Name)
	cfg.Org = stringOrNull(t.Org)
	cfg.Version = stringOrNull(t.Version)
	cfg.Description = stringOrNull(t.Description)
	cfg.Instruction = stringOrNull(t.Instruction)
	cfg.Inputs = inV
	cfg.Services = svcV
	cfg.ServicePorts = portV
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}
