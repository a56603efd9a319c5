package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestProviderServerSchema(t *testing.T) {
	srv, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	for _, name := range []string{"dreadnode_task_environment", "dreadnode_sandbox"} {
		if _, ok := resp.ResourceSchemas[name]; !ok {
			t.Errorf("resource %s missing", name)
		}
	}
	for _, name := range []string{"dreadnode_sandbox", "dreadnode_sandboxes", "dreadnode_sandbox_usage", "dreadnode_task"} {
		if _, ok := resp.DataSourceSchemas[name]; !ok {
			t.Errorf("data source %s missing", name)
		}
	}
}

func TestProviderSchemaValidateImplementation(t *testing.T) {
	ctx := context.Background()
	p := New("test")()
	var resp fwprovider.SchemaResponse
	p.Schema(ctx, fwprovider.SchemaRequest{}, &resp)
	diags := resp.Diagnostics
	diags.Append(resp.Schema.ValidateImplementation(ctx)...)
	for _, d := range diags {
		t.Errorf("%s: %s", d.Summary(), d.Detail())
	}
	if !resp.Schema.Attributes["api_key"].IsSensitive() {
		t.Error("api_key must be sensitive")
	}
}

func TestResourceSchemasValidateImplementation(t *testing.T) {
	ctx := context.Background()
	for _, f := range New("test")().Resources(ctx) {
		r := f()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "dreadnode"}, &md)
		t.Run(md.TypeName, func(t *testing.T) {
			var resp resource.SchemaResponse
			r.Schema(ctx, resource.SchemaRequest{}, &resp)
			diags := resp.Diagnostics
			diags.Append(resp.Schema.ValidateImplementation(ctx)...)
			for _, d := range diags {
				t.Errorf("%s: %s", d.Summary(), d.Detail())
			}
			if resp.Schema.MarkdownDescription == "" {
				t.Error("no description")
			}
			for name, a := range resp.Schema.Attributes {
				if a.GetMarkdownDescription() == "" {
					t.Errorf("attribute %s has no description", name)
				}
			}
		})
	}
}

func TestEphemeralResourceSchemasValidateImplementation(t *testing.T) {
	ctx := context.Background()
	p, ok := New("test")().(fwprovider.ProviderWithEphemeralResources)
	if !ok {
		t.Fatal("the provider has no ephemeral resources")
	}
	for _, f := range p.EphemeralResources(ctx) {
		e := f()
		var md ephemeral.MetadataResponse
		e.Metadata(ctx, ephemeral.MetadataRequest{ProviderTypeName: "dreadnode"}, &md)
		t.Run(md.TypeName, func(t *testing.T) {
			var resp ephemeral.SchemaResponse
			e.Schema(ctx, ephemeral.SchemaRequest{}, &resp)
			diags := resp.Diagnostics
			diags.Append(resp.Schema.ValidateImplementation(ctx)...)
			for _, dg := range diags {
				t.Errorf("%s: %s", dg.Summary(), dg.Detail())
			}
			if !resp.Schema.Attributes["access_token"].IsSensitive() {
				t.Errorf("%s.access_token is not sensitive", md.TypeName)
			}
		})
	}
}

func TestDataSourceSchemasValidateImplementation(t *testing.T) {
	ctx := context.Background()
	for _, f := range New("test")().DataSources(ctx) {
		d := f()
		var md datasource.MetadataResponse
		d.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "dreadnode"}, &md)
		t.Run(md.TypeName, func(t *testing.T) {
			var resp datasource.SchemaResponse
			d.Schema(ctx, datasource.SchemaRequest{}, &resp)
			diags := resp.Diagnostics
			diags.Append(resp.Schema.ValidateImplementation(ctx)...)
			for _, dg := range diags {
				t.Errorf("%s: %s", dg.Summary(), dg.Detail())
			}
			for name, a := range resp.Schema.Attributes {
				if a.GetMarkdownDescription() == "" {
					t.Errorf("attribute %s has no description", name)
				}
			}
		})
	}
}

func TestSecretsAreSensitive(t *testing.T) {
	ctx := context.Background()
	want := map[string][]string{
		"dreadnode_task_environment": {"execute_token", "inputs"},
		"dreadnode_sandbox":          {"access_token", "env_vars", "env_vars_wo"},
	}
	for _, f := range New("test")().Resources(ctx) {
		r := f()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "dreadnode"}, &md)
		var resp resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &resp)
		for _, name := range want[md.TypeName] {
			if !resp.Schema.Attributes[name].IsSensitive() {
				t.Errorf("%s.%s is not sensitive", md.TypeName, name)
			}
		}
	}
}

// configure runs the provider's Configure with the given attribute values
// (nil: null).
func configure(t *testing.T, vals map[string]*string) fwprovider.ConfigureResponse {
	t.Helper()
	ctx := context.Background()
	p := New("test")()
	var sresp fwprovider.SchemaResponse
	p.Schema(ctx, fwprovider.SchemaRequest{}, &sresp)
	typ := sresp.Schema.Type().TerraformType(ctx)
	attrs := map[string]tftypes.Value{}
	for _, name := range []string{"api_url", "api_key", "org", "workspace"} {
		if v := vals[name]; v != nil {
			attrs[name] = tftypes.NewValue(tftypes.String, *v)
		} else {
			attrs[name] = tftypes.NewValue(tftypes.String, nil)
		}
	}
	req := fwprovider.ConfigureRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, attrs)}}
	var resp fwprovider.ConfigureResponse
	p.Configure(ctx, req, &resp)
	return resp
}

func ptr(s string) *string { return &s }

func TestConfigureMissingSettingsNameAttributeAndEnv(t *testing.T) {
	for _, env := range []string{EnvAPIURL, EnvAPIKey, EnvOrg, EnvWorkspace} {
		t.Setenv(env, "")
	}
	resp := configure(t, nil)
	if !resp.Diagnostics.HasError() {
		t.Fatal("no error")
	}
	all := ""
	for _, d := range resp.Diagnostics {
		all += d.Summary() + ": " + d.Detail() + "\n"
	}
	for _, want := range []string{`"api_url"`, EnvAPIURL, `"api_key"`, EnvAPIKey} {
		if !strings.Contains(all, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, all)
		}
	}
}

func TestConfigureFromEnvironment(t *testing.T) {
	t.Setenv(EnvAPIURL, "http://127.0.0.1:1")
	t.Setenv(EnvAPIKey, "key")
	t.Setenv(EnvOrg, "acme")
	t.Setenv(EnvWorkspace, "ws")
	resp := configure(t, nil)
	if resp.Diagnostics.HasError() {
		t.Fatalf("%v", resp.Diagnostics)
	}
	d := resp.ResourceData.(*providerData)
	if d.org != "acme" || d.workspace != "ws" || d.client.BaseURL() != "http://127.0.0.1:1" {
		t.Fatalf("%+v", d)
	}
}

func TestConfigureAttributesOverrideEnvironment(t *testing.T) {
	t.Setenv(EnvAPIURL, "http://env:1")
	t.Setenv(EnvAPIKey, "key")
	t.Setenv(EnvOrg, "env-org")
	t.Setenv(EnvWorkspace, "")
	resp := configure(t, map[string]*string{"api_url": ptr("https://cfg.example/"), "org": ptr("cfg-org")})
	if resp.Diagnostics.HasError() {
		t.Fatalf("%v", resp.Diagnostics)
	}
	d := resp.DataSourceData.(*providerData)
	if d.org != "cfg-org" || d.client.BaseURL() != "https://cfg.example" {
		t.Fatalf("org %q url %q", d.org, d.client.BaseURL())
	}
	// The workspace is required only by task environments, with a clear error.
	var diags = resp.Diagnostics
	if _, _, ok := d.requireWorkspace(&diags); ok {
		t.Fatal("requireWorkspace ok without a workspace")
	}
	msg := diags[len(diags)-1].Detail()
	if !strings.Contains(msg, `"workspace"`) || !strings.Contains(msg, EnvWorkspace) {
		t.Fatalf("detail %q", msg)
	}
}

func TestConfigureBadURL(t *testing.T) {
	t.Setenv(EnvAPIKey, "key")
	resp := configure(t, map[string]*string{"api_url": ptr("127.0.0.1:8080")})
	if !resp.Diagnostics.HasError() {
		t.Fatal("no error")
	}
	if d := resp.Diagnostics[0].Detail(); !strings.Contains(d, EnvAPIURL) {
		t.Fatalf("detail %q", d)
	}
}
