// Package provider implements the Terraform provider for Dreadnode
// (registry.terraform.io/dreadnode/dreadnode) with terraform-plugin-framework.
package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/dreadnode/dreadnode"

// Environment variables the provider configuration defaults from.
const (
	EnvAPIURL    = "DREADNODE_API_URL"
	EnvAPIKey    = "DREADNODE_API_KEY"
	EnvOrg       = "DREADNODE_ORG"
	EnvWorkspace = "DREADNODE_WORKSPACE"
)

var (
	_ provider.Provider                       = (*dreadnodeProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*dreadnodeProvider)(nil)
)

// New returns a constructor of the provider for the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider {
		return &dreadnodeProvider{version: version}
	}
}

type dreadnodeProvider struct {
	version string
}

type providerModel struct {
	APIURL    types.String `tfsdk:"api_url"`
	APIKey    types.String `tfsdk:"api_key"`
	Org       types.String `tfsdk:"org"`
	Workspace types.String `tfsdk:"workspace"`
}

// providerData is handed to every resource and data source.
type providerData struct {
	client    *client.Client
	org       string
	workspace string
}

// requireOrg returns the org, or adds a diagnostic naming the attribute and
// the environment variable that set it.
func (p *providerData) requireOrg(diags *diag.Diagnostics) (string, bool) {
	if p.org == "" {
		diags.AddError("Missing Dreadnode organization",
			fmt.Sprintf("This needs the organization: set the provider attribute \"org\" or the environment variable %s.", EnvOrg))
		return "", false
	}
	return p.org, true
}

// requireWorkspace returns org and workspace, or adds diagnostics.
func (p *providerData) requireWorkspace(diags *diag.Diagnostics) (string, string, bool) {
	org, ok := p.requireOrg(diags)
	if p.workspace == "" {
		diags.AddError("Missing Dreadnode workspace",
			fmt.Sprintf("Task environments live in a workspace: set the provider attribute \"workspace\" or the environment variable %s.", EnvWorkspace))
		return "", "", false
	}
	if !ok {
		return "", "", false
	}
	return org, p.workspace, true
}

func (p *dreadnodeProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "dreadnode"
	resp.Version = p.version
}

func (p *dreadnodeProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The Dreadnode provider manages agent sandboxes and task environments of a Dreadnode backend.",
		Attributes: map[string]schema.Attribute{
			"api_url": schema.StringAttribute{
				MarkdownDescription: "Base URL of the Dreadnode API, e.g. `http://127.0.0.1:8080`. Defaults to the environment variable `" + EnvAPIURL + "`.",
				Optional:            true,
			},
			"api_key": schema.StringAttribute{
				MarkdownDescription: "API key of the organization, sent as `X-API-Key`. Defaults to the environment variable `" + EnvAPIKey + "`.",
				Optional:            true,
				Sensitive:           true,
			},
			"org": schema.StringAttribute{
				MarkdownDescription: "Organization the API key belongs to (used by the `/api/v1/org/{org}/...` routes: task environments, usage, the task catalog). Defaults to the environment variable `" + EnvOrg + "`.",
				Optional:            true,
			},
			"workspace": schema.StringAttribute{
				MarkdownDescription: "Workspace of the task environments. Defaults to the environment variable `" + EnvWorkspace + "`. Only `dreadnode_task_environment` needs it.",
				Optional:            true,
			},
		},
	}
}

// setting resolves one provider setting from configuration or, unset, from
// fromEnv (the value of the environment variable env).
func setting(v types.String, env, fromEnv string, diags *diag.Diagnostics, attr string) string {
	if v.IsUnknown() {
		diags.AddAttributeError(path.Root(attr), "Unknown Dreadnode provider setting",
			fmt.Sprintf("The provider cannot be configured with an unknown value for %q. Set it to a known value, or leave it unset and use the environment variable %s.", attr, env))
		return ""
	}
	if !v.IsNull() {
		return strings.TrimSpace(v.ValueString())
	}
	return strings.TrimSpace(fromEnv)
}

func (p *dreadnodeProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}

	envCfg, err := readEnvConfig()
	if err != nil {
		resp.Diagnostics.AddError("Invalid Dreadnode environment", err.Error())
		return
	}
	apiURL := setting(cfg.APIURL, EnvAPIURL, envCfg.APIURL, &resp.Diagnostics, "api_url")
	apiKey := setting(cfg.APIKey, EnvAPIKey, envCfg.APIKey, &resp.Diagnostics, "api_key")
	org := setting(cfg.Org, EnvOrg, envCfg.Org, &resp.Diagnostics, "org")
	workspace := setting(cfg.Workspace, EnvWorkspace, envCfg.Workspace, &resp.Diagnostics, "workspace")
	if resp.Diagnostics.HasError() {
		return
	}
	if apiURL == "" {
		resp.Diagnostics.AddAttributeError(path.Root("api_url"), "Missing Dreadnode API URL",
			fmt.Sprintf("Set the provider attribute \"api_url\" or the environment variable %s to the Dreadnode API's base URL (e.g. http://127.0.0.1:8080).", EnvAPIURL))
	}
	if apiKey == "" {
		resp.Diagnostics.AddAttributeError(path.Root("api_key"), "Missing Dreadnode API key",
			fmt.Sprintf("Set the provider attribute \"api_key\" or the environment variable %s to an API key of your organization.", EnvAPIKey))
	}
	if resp.Diagnostics.HasError() {
		return
	}

	c, err := client.New(client.Config{
		BaseURL:   apiURL,
		APIKey:    apiKey,
		UserAgent: "terraform-provider-dreadnode/" + p.version,
	})
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("api_url"), "Invalid Dreadnode API URL",
			fmt.Sprintf("%s (set by the provider attribute \"api_url\" or the environment variable %s).", err, EnvAPIURL))
		return
	}
	ctx = tflog.SetField(ctx, "dreadnode_api_url", apiURL)
	tflog.Debug(ctx, "configured Dreadnode client", map[string]any{"org": org, "workspace": workspace})

	data := &providerData{client: c, org: org, workspace: workspace}
	resp.ResourceData = data
	resp.DataSourceData = data
	resp.EphemeralResourceData = data
}

func (p *dreadnodeProvider) Resources(_ context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewTaskEnvironmentResource,
		NewSandboxResource,
		NewAPIKeyResource,
		NewVolumeResource,
		NewSnapshotResource,
		NewTemplateResource,
	}
}

// EphemeralResources need Terraform 1.10 or later; older versions ignore them.
func (p *dreadnodeProvider) EphemeralResources(_ context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{
		NewSandboxConnectionEphemeral,
	}
}

func (p *dreadnodeProvider) DataSources(_ context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewSandboxDataSource,
		NewSandboxesDataSource,
		NewSandboxUsageDataSource,
		NewTaskDataSource,
	}
}

// configuredData extracts the providerData handed to Configure of a
// resource or data source (nil before the provider is configured).
func configuredData(in any, diags *diag.Diagnostics) *providerData {
	if in == nil {
		return nil
	}
	d, ok := in.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("Expected *providerData, got %T. Please report this issue to the provider developers.", in))
		return nil
	}
	return d
}
