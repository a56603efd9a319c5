package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

func TestAccSandboxDataSources(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const suite = "ds"
	cfg := b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_sandbox" "a" {
  timeout  = 300
  metadata = { suite = %[1]q, role = "a" }
}

resource "dreadnode_sandbox" "b" {
  timeout  = 300
  metadata = { suite = %[1]q, role = "b" }
}

data "dreadnode_sandbox" "a" {
  id = dreadnode_sandbox.a.id
}

data "dreadnode_sandboxes" "suite" {
  state    = ["running"]
  metadata = { suite = %[1]q }

  depends_on = [dreadnode_sandbox.a, dreadnode_sandbox.b]
}

data "dreadnode_sandboxes" "role_b" {
  metadata = { suite = %[1]q, role = "b" }

  depends_on = [dreadnode_sandbox.a, dreadnode_sandbox.b]
}

data "dreadnode_sandbox_usage" "org" {
  depends_on = [dreadnode_sandbox.a, dreadnode_sandbox.b]
}
`, suite)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{{
			Config: cfg,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttrPair("data.dreadnode_sandbox.a", "id", "dreadnode_sandbox.a", "id"),
				resource.TestCheckResourceAttr("data.dreadnode_sandbox.a", "state", "running"),
				resource.TestCheckResourceAttr("data.dreadnode_sandbox.a", "template", "base"),
				resource.TestCheckResourceAttr("data.dreadnode_sandbox.a", "metadata.role", "a"),
				resource.TestCheckResourceAttrPair("data.dreadnode_sandbox.a", "cpu_count", "dreadnode_sandbox.a", "cpu_count"),
				resource.TestCheckResourceAttr("data.dreadnode_sandboxes.suite", "ids.#", "2"),
				resource.TestCheckResourceAttr("data.dreadnode_sandboxes.suite", "sandboxes.#", "2"),
				resource.TestCheckResourceAttr("data.dreadnode_sandboxes.role_b", "ids.#", "1"),
				resource.TestCheckResourceAttrPair("data.dreadnode_sandboxes.role_b", "ids.0", "dreadnode_sandbox.b", "id"),
				resource.TestCheckResourceAttr("data.dreadnode_sandboxes.role_b", "sandboxes.0.metadata.role", "b"),
				resource.TestCheckResourceAttr("data.dreadnode_sandbox_usage.org", "id", b.Org),
				resource.TestMatchResourceAttr("data.dreadnode_sandbox_usage.org", "sessions_count", regexp.MustCompile(`^[0-9]+$`)),
				resource.TestCheckResourceAttrSet("data.dreadnode_sandbox_usage.org", "total_runtime_seconds"),
			),
		}},
	})
}

func TestAccSandboxDataSource_notFound(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: b.providerConfig() + `
data "dreadnode_sandbox" "x" {
  id = "does-not-exist"
}
`,
			ExpectError: regexp.MustCompile(`Sandbox not found`),
		}},
	})
}

func TestAccTaskDataSource(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: b.providerConfig() + `
data "dreadnode_task" "web" {
  ref = "tf-web"
}
`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("data.dreadnode_task.web", "name", "tf-web"),
					resource.TestCheckResourceAttr("data.dreadnode_task.web", "version", "1.0.0"),
					resource.TestCheckResourceAttr("data.dreadnode_task.web", "description", "A static web page served by busybox httpd (provider acceptance tests)."),
					resource.TestCheckResourceAttr("data.dreadnode_task.web", "inputs.greeting.default", "hello"),
					resource.TestCheckResourceAttr("data.dreadnode_task.web", "services.#", "1"),
					resource.TestCheckResourceAttr("data.dreadnode_task.web", "services.0", "web"),
				),
			},
			{
				Config: b.providerConfig() + `
data "dreadnode_task" "nope" {
  ref = "no-such-task@9.9.9"
}
`,
				ExpectError: regexp.MustCompile(`Task not found`),
			},
		},
	})
}
