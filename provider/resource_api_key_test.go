package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// apiKeyAttrErrors runs the validators the schema gives attribute name on
// value and returns the error details.
func apiKeyAttrErrors(t *testing.T, name string, value types.String) []string {
	t.Helper()
	var resp fwresource.SchemaResponse
	NewAPIKeyResource().Schema(context.Background(), fwresource.SchemaRequest{}, &resp)
	a, ok := resp.Schema.Attributes[name].(schema.StringAttribute)
	if !ok {
		t.Fatalf("dreadnode_api_key has no string attribute %s", name)
	}
	var out []string
	for _, v := range a.Validators {
		vr := &validator.StringResponse{}
		v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root(name), ConfigValue: value}, vr)
		for _, d := range vr.Diagnostics.Errors() {
			out = append(out, d.Detail())
		}
	}
	return out
}

func TestAPIKeyValidators(t *testing.T) {
	for _, tc := range []struct {
		attr, value string
		wantErr     string // "" when valid
	}{
		{"scope", "full", ""},
		{"scope", "read", ""},
		{"scope", "admin", `value must be one of: ["full" "read"], got: "admin"`},
		{"scope", "READ", `got: "READ"`},
		{"expires_at", "2030-01-02T15:04:05Z", ""},
		{"expires_at", "2030-01-02T15:04:05.5+02:00", ""},
		{"expires_at", "2030-01-02", `expires_at value must be an RFC 3339 time`},
		{"expires_at", "tomorrow", `got "tomorrow"`},
		{"expires_at", "2030-01-02 15:04:05Z", `RFC 3339`},
		{"name", "", `length must be between 1 and 100`},
		{"name", strings.Repeat("n", 101), `length must be between 1 and 100`},
		{"name", "ci", ""},
	} {
		errs := apiKeyAttrErrors(t, tc.attr, types.StringValue(tc.value))
		switch {
		case tc.wantErr == "" && len(errs) > 0:
			t.Errorf("%s = %q: unexpected errors %v", tc.attr, tc.value, errs)
		case tc.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.wantErr)):
			t.Errorf("%s = %q: errors %v, want one containing %q", tc.attr, tc.value, errs, tc.wantErr)
		}
	}
	// Unknown (from another resource) and null values are checked at apply.
	for _, v := range []types.String{types.StringNull(), types.StringUnknown()} {
		if errs := apiKeyAttrErrors(t, "expires_at", v); len(errs) > 0 {
			t.Errorf("expires_at = %v: %v", v, errs)
		}
	}
}
