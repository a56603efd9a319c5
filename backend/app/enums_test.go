package app

import (
	"fmt"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
)

// The document's state enums, and so the generated types client/, provider/
// and dn spell states with, are exactly the domain's sets (the server's
// source): a state added to or dropped from the domain fails here until
// the document says the same.
func TestGeneratedStateEnumsAreTheDomains(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	enumOf := func(schema *openapi3.SchemaRef) []string {
		var out []string
		for _, v := range schema.Value.Enum {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	schema := func(name string) *openapi3.SchemaRef {
		s := doc.Components.Schemas[name]
		if s == nil {
			t.Fatalf("the document has no schema %s", name)
		}
		return s
	}
	strs := func(vs any) []string {
		var out []string
		switch v := vs.(type) {
		case []sandbox.State:
			for _, x := range v {
				out = append(out, string(x))
			}
		case []sandbox.Phase:
			for _, x := range v {
				out = append(out, string(x))
			}
		case []sandbox.LedgerState:
			for _, x := range v {
				out = append(out, string(x))
			}
		case []taskenv.State:
			for _, x := range v {
				out = append(out, string(x))
			}
		}
		return out
	}
	cases := []struct {
		what   string
		doc    []string
		domain []string
		valid  func(string) bool
	}{
		{"SandboxState", enumOf(schema("SandboxState")), strs(sandbox.States), func(s string) bool { return apitypes.SandboxState(s).Valid() }},
		{"Sandbox.state", enumOf(schema("Sandbox").Value.Properties["state"]), strs(sandbox.States), func(s string) bool { return apitypes.SandboxState(s).Valid() }},
		{"SandboxTimelineEntry.phase", enumOf(schema("SandboxTimelineEntry").Value.Properties["phase"]), strs(sandbox.Phases),
			func(s string) bool { return apitypes.SandboxTimelineEntryPhase(s).Valid() }},
		{"TaskEnvironmentState", enumOf(schema("TaskEnvironmentState")), strs(taskenv.States), func(s string) bool { return apitypes.TaskEnvironmentState(s).Valid() }},
		{"LedgerState", enumOf(schema("LedgerState")), strs(sandbox.LedgerStates), func(s string) bool { return apitypes.LedgerState(s).Valid() }},
		{"WorldJob.state", enumOf(schema("WorldJob").Value.Properties["state"]), sandbox.JobStates, func(s string) bool { return apitypes.WorldJobState(s).Valid() }},
	}
	for _, c := range cases {
		got, want := slices.Sorted(slices.Values(c.doc)), slices.Sorted(slices.Values(c.domain))
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: the document says %v, the domain %v", c.what, got, want)
		}
		for _, s := range c.domain {
			if !c.valid(s) {
				t.Errorf("%s: the generated enum refuses the domain's %q", c.what, s)
			}
		}
		if c.valid("bogus") || c.valid("") {
			t.Errorf("%s: the generated enum accepts a state the domain does not have", c.what)
		}
	}
}
