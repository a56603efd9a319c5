package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func TestFieldPathsFollowLoc(t *testing.T) {
	cases := []struct {
		fields fieldPaths
		loc    []string
		want   path.Path
	}{
		{sandboxFields, []string{"templateID"}, path.Root("template")},
		{sandboxFields, []string{"timeout"}, path.Root("timeout")},
		{sandboxFields, []string{"envVars", "1BAD"}, path.Root("env_vars").AtMapKey("1BAD")},
		{sandboxFields.with("envVars", "env_vars_wo{}"), []string{"envVars", "X"}, path.Root("env_vars_wo").AtMapKey("X")},
		{sandboxFields, []string{"resources", "memoryMB"}, path.Root("resources").AtName("memory_mb")},
		{sandboxFields, []string{"network", "allowOut", "2"}, path.Root("network").AtName("allow_out").AtListIndex(2)},
		{environmentFields, []string{"inputs", "flag"}, path.Root("inputs").AtMapKey("flag")},
		{environmentFields, []string{"secret_ids", "1"}, path.Root("secret_ids").AtListIndex(1)},
		{sandboxFields, []string{"volumeMounts", "0"}, path.Root("volume_mounts").AtListIndex(0)},
	}
	for _, tc := range cases {
		got, ok := tc.fields.pathOf(tc.loc)
		if !ok || !got.Equal(tc.want) {
			t.Errorf("pathOf(%v) = %s, %v; want %s", tc.loc, got, ok, tc.want)
		}
	}
	if _, ok := sandboxFields.pathOf([]string{"waitReady"}); ok {
		t.Error("an unmapped field must not name an attribute")
	}
}

func TestAPIErrorAtNamesTheAttribute(t *testing.T) {
	err := &client.APIError{Method: "POST", Path: "/sandboxes", StatusCode: 400, Envelope: apitypes.Error{Detail: "templateID: unknown template",
		Errors: []apitypes.FieldError{{Loc: []any{"body", "templateID"}, Msg: `unknown template "nope"; available: base`}}}}
	var diags diag.Diagnostics
	apiErrorAt(&diags, "Error creating sandbox", err, sandboxFields)
	if len(diags) != 1 {
		t.Fatalf("diagnostics: %v", diags)
	}
	wp, ok := diags[0].(diag.DiagnosticWithPath)
	if !ok || !wp.Path().Equal(path.Root("template")) || !strings.Contains(diags[0].Detail(), `unknown template "nope"`) {
		t.Fatalf("want an error on template carrying the server's message, got %#v", diags[0])
	}

	diags = nil
	apiErrorAt(&diags, "Error creating sandbox", errors.New("connection refused"), sandboxFields)
	if _, ok := diags[0].(diag.DiagnosticWithPath); ok || !diags.HasError() {
		t.Fatalf("an error without loc stays general: %#v", diags)
	}
}
