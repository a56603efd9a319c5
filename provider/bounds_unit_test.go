package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// The plan-time bounds are the API document's (apitypes' generated
// constants): a value at the document's bound passes, one past it fails.
func TestUnitPlanBoundsAreTheDocuments(t *testing.T) {
	ctx := context.Background()
	var resp resource.SchemaResponse
	NewSandboxResource().Schema(ctx, resource.SchemaRequest{}, &resp)
	attrs := resp.Schema.Attributes
	nested := attrs["resources"].(schema.SingleNestedAttribute).Attributes
	ints := []struct {
		name   string
		a      schema.Attribute
		lo, hi int64
	}{
		{"timeout", attrs["timeout"], apitypes.CreateSandboxTimeoutMinimum, apitypes.CreateSandboxTimeoutMaximum},
		{"resources.cpu_count", nested["cpu_count"], apitypes.SandboxResourcesCPUCountMinimum, apitypes.SandboxResourcesCPUCountMaximum},
		{"resources.memory_mb", nested["memory_mb"], apitypes.SandboxResourcesMemoryMBMinimum, apitypes.SandboxResourcesMemoryMBMaximum},
	}
	for _, c := range ints {
		for v, ok := range map[int64]bool{c.lo: true, c.hi: true, c.lo - 1: false, c.hi + 1: false} {
			var out validator.Int64Response
			for _, vd := range c.a.(schema.Int64Attribute).Validators {
				vd.ValidateInt64(ctx, validator.Int64Request{ConfigValue: types.Int64Value(v)}, &out)
			}
			if out.Diagnostics.HasError() == ok {
				t.Errorf("%s = %d: errors %v, want accepted %v", c.name, v, out.Diagnostics, ok)
			}
		}
	}
	strMap := func(n int, val string) types.Map {
		m := map[string]attr.Value{}
		for i := range n {
			m["K"+strings.Repeat("x", i)] = types.StringValue(val)
		}
		return types.MapValueMust(types.StringType, m)
	}
	maps := []struct {
		name       string
		count, len int
		validators []validator.Map // env_vars' others need a whole configuration
	}{
		{"metadata", apitypes.CreateSandboxMetadataMaxProperties, apitypes.CreateSandboxMetadataValuesMaxLength, attrs["metadata"].(schema.MapAttribute).Validators},
		{"env_vars", apitypes.CreateSandboxEnvVarsMaxProperties, apitypes.CreateSandboxEnvVarsValuesMaxLength, envVarsBounds},
	}
	for _, c := range maps {
		for _, m := range []struct {
			v  types.Map
			ok bool
		}{
			{strMap(c.count, strings.Repeat("v", c.len)), true},
			{strMap(c.count+1, "v"), false},
			{strMap(1, strings.Repeat("v", c.len+1)), false},
		} {
			var out validator.MapResponse
			for _, vd := range c.validators {
				vd.ValidateMap(ctx, validator.MapRequest{ConfigValue: m.v}, &out)
			}
			if out.Diagnostics.HasError() == m.ok {
				t.Errorf("%s with %d entries: errors %v, want accepted %v", c.name, len(m.v.Elements()), out.Diagnostics, m.ok)
			}
		}
	}
}

// The provider's environment is read through one typed struct: each
// documented variable lands in its field.
func TestUnitEnvConfig(t *testing.T) {
	t.Setenv(EnvAPIURL, "http://api.example:8080")
	t.Setenv(EnvAPIKey, "k")
	t.Setenv(EnvOrg, "o")
	t.Setenv(EnvWorkspace, "w")
	c, err := readEnvConfig()
	if err != nil || c != (envConfig{APIURL: "http://api.example:8080", APIKey: "k", Org: "o", Workspace: "w"}) {
		t.Fatalf("%+v %v", c, err)
	}
}
