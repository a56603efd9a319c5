package provider

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// Errors come at plan, on the attribute: the server's bounds, contradictory
// network settings, and a template or task the API does not know.
func TestAccPlanTimeErrors(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	step := func(config, want string) resource.TestStep {
		return resource.TestStep{Config: b.providerConfig() + config, PlanOnly: true, ExpectError: wrapped(want)}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`
resource "dreadnode_sandbox" "test" {
  timeout = 30
}
`, `(?s)Invalid Attribute Value.*with dreadnode_sandbox.test.*timeout = 30.*Attribute timeout value must be between 60 and 86400, got: 30`),
			step(`
resource "dreadnode_sandbox" "test" {
  resources = { memory_mb = 16 }
}
`, `(?s)with dreadnode_sandbox.test.*Attribute resources.memory_mb value must be between 64 and 65536, got: 16`),
			step(`
resource "dreadnode_sandbox" "test" {
  network = {
    allow_internet_access = false
    deny_out              = ["10.0.0.0/8"]
  }
}
`, `(?s)Invalid Attribute Combination.*network.allow_internet_access.*network.deny_out`),
			step(`
resource "dreadnode_sandbox" "test" {
  template = "no-such-template"
}
`, `(?s)Unknown template.*with dreadnode_sandbox.test.*template = "no-such-template".*HTTP 404.*unknown template "no-such-template"; available: base`),
			step(`
resource "dreadnode_sandbox" "test" {
  env_vars = { "1BAD" = "x" }
}
`, `(?s)with dreadnode_sandbox.test.*must be an environment variable name`),
			step(`
resource "dreadnode_sandbox" "test" {
  wait_for = "completed"
}
`, `(?s)wait_for = "completed" needs a command`),
			step(`
resource "dreadnode_task_environment" "test" {
  task_ref    = "no-such-task"
  timeout_sec = 3600
}
`, `(?s)Unknown task.*task_ref = "no-such-task".*HTTP 404`),
			step(`
resource "dreadnode_api_key" "test" {
  name  = "x"
  scope = "admin"
}
`, `(?s)Invalid Attribute Value Match.*with dreadnode_api_key.test.*scope = "admin".*value must be one of`),
			step(`
resource "dreadnode_api_key" "test" {
  name       = "x"
  expires_at = "next week"
}
`, `(?s)Invalid RFC 3339 time.*with dreadnode_api_key.test.*expires_at = "next week"`),
		},
	})
}

// wrapped compiles pattern with each space matching any run of white space,
// since Terraform wraps the diagnostics it prints.
func wrapped(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", `\s+`))
}

// An API that cannot be reached at plan gives a warning, not an error: the
// plan succeeds (the apply would try again).
func TestAccPlanTimeCheckUnreachableAPIWarns(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	r := newCLIRun(t, `
provider "dreadnode" {
  api_url = "http://127.0.0.1:9"
  api_key = "`+b.APIKey+`"
}
resource "dreadnode_sandbox" "test" {
  template = "base"
}
`)
	out := r.mustRun("plan", "-input=false", "-no-color")
	for _, want := range []string{"Warning: Could not check the template at plan", `template = "base"`, "1 to add"} {
		if !wrapped(regexp.QuoteMeta(want)).MatchString(out) {
			t.Fatalf("plan output lacks %q:\n%s", want, out)
		}
	}
}

// An error the API returns at apply lands on the attribute its loc names
// (here body.network.allowOut.0 → network.allow_out[0]).
func TestAccApplyErrorNamesTheAttribute(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{{
			Config: b.providerConfig() + `
resource "dreadnode_sandbox" "test" {
  network = {
    allow_out = ["not a host!"]
  }
}
`,
			ExpectError: wrapped(`(?s)Error creating sandbox.*with dreadnode_sandbox.test.*network.allow_out\[0\].*must be an IP address, a CIDR block or a host name.*HTTP 400`),
		}},
	})
}
