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

// stringAttrErrors runs the validators r's schema gives attribute name on
// value and returns the error details.
func stringAttrErrors(t *testing.T, r fwresource.Resource, name, value string) []string {
	t.Helper()
	var resp fwresource.SchemaResponse
	r.Schema(context.Background(), fwresource.SchemaRequest{}, &resp)
	a, ok := resp.Schema.Attributes[name].(schema.StringAttribute)
	if !ok {
		t.Fatalf("no string attribute %s", name)
	}
	var out []string
	for _, v := range a.Validators {
		vr := &validator.StringResponse{}
		v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root(name), ConfigValue: types.StringValue(value)}, vr)
		for _, d := range vr.Diagnostics.Errors() {
			out = append(out, d.Detail())
		}
	}
	return out
}

// The plan refuses the names the API would refuse (NewVolume's pattern and
// length, a snapshot's alias[:tag]) and dreadnode_sandbox's template takes
// a snapshot's snapshot_id ("alias:tag").
func TestUnitVolumeSnapshotValidators(t *testing.T) {
	for _, tc := range []struct {
		r          fwresource.Resource
		attr, val  string
		wantErrSub string // "" when valid
	}{
		{NewVolumeResource(), "name", "datasets", ""},
		{NewVolumeResource(), "name", "Data_Sets-2", ""},
		{NewVolumeResource(), "name", "", "length must be between 1 and 64"},
		{NewVolumeResource(), "name", strings.Repeat("v", 65), "length must be between 1 and 64"},
		{NewVolumeResource(), "name", "bad name", "letters, digits"},
		{NewVolumeResource(), "name", "../etc", "letters, digits"},
		{NewSnapshotResource(), "name", "prepared", ""},
		{NewSnapshotResource(), "name", "prepared:v1.2", ""},
		{NewSnapshotResource(), "name", "Prepared", "alias[:tag]"},
		{NewSnapshotResource(), "name", "prepared:", "alias[:tag]"},
		{NewSnapshotResource(), "name", "a:b:c", "alias[:tag]"},
		{NewSandboxResource(), "template", "base", ""},
		{NewSandboxResource(), "template", "prepared:v1", ""},
		{NewSandboxResource(), "template", "k3j2h4g5f6d7s8a9q0w1:default", ""},
		{NewSandboxResource(), "template", "prepared:", "template id"},
		{NewSandboxResource(), "template", "Base", "template id"},
	} {
		errs := stringAttrErrors(t, tc.r, tc.attr, tc.val)
		switch {
		case tc.wantErrSub == "" && len(errs) > 0:
			t.Errorf("%T %s = %q: unexpected errors %v", tc.r, tc.attr, tc.val, errs)
		case tc.wantErrSub != "" && (len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), tc.wantErrSub)):
			t.Errorf("%T %s = %q: errors %v, want one containing %q", tc.r, tc.attr, tc.val, errs, tc.wantErrSub)
		}
	}
}
