package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// accBaseImage is the local image templates are built from (make image).
const accBaseImage = "dreadnode/base:latest"

// templateGone checks that the template is unknown to the API and that no
// image labelled with it is left on the engine.
func (b *accBackend) templateGone(id string) error {
	err := eventually(30*time.Second, func() error {
		_, err := b.client.ListTemplateBuilds(context.Background(), id)
		if client.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("template %s still exists after destroy", id)
	})
	if err != nil {
		return err
	}
	return noDockerObjects("image", "dev.dreadnode.template="+id)
}

func accTemplateName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, rand.Uint32())
}

// A template is built and waited for, a sandbox starts from it and sees its
// ENV, WORKDIR and files; changing a step is a new build of the same
// template (an update, same id); import by id reads it back; a template
// deleted outside Terraform shows in the plan as one to create.
func TestAccTemplate_buildSandboxUpdateImport(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	name := accTemplateName("acc-tpl")
	const addr = "dreadnode_template.t"
	cfg := func(value string) string {
		return b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_template" "t" {
  name       = %q
  from_image = %q
  cpu_count  = 1
  memory_mb  = 256
  steps = [
    { type = "RUN", args = ["echo hello-from-template > /hello.txt"] },
    { type = "ENV", args = ["FOO", %q] },
    { type = "WORKDIR", args = ["/work"] },
  ]
}

resource "dreadnode_sandbox" "s" {
  template = dreadnode_template.t.id
  timeout  = 300
  command  = ["sh", "-c", "test \"$FOO\" = %s && test \"$(pwd)\" = /work && grep -q hello-from-template /hello.txt"]
  wait_for = "completed"
}
`, name, accBaseImage, value, value)
	}
	var id, build1, build2 string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: cfg("bar"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "build_status", "ready"),
					resource.TestCheckResourceAttr(addr, "cpu_count", "1"),
					resource.TestCheckResourceAttr(addr, "memory_mb", "256"),
					resource.TestCheckResourceAttrWith(addr, "size_bytes", func(v string) error {
						if v == "" || v == "0" {
							return fmt.Errorf("size_bytes is %q", v)
						}
						return nil
					}),
					captureAttr(addr, "id", &id),
					captureAttr(addr, "build_id", &build1),
					resource.TestCheckResourceAttr("dreadnode_sandbox.s", "exit_code", "0"),
				),
			},
			{
				Config: cfg("baz"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						plancheck.ExpectUnknownValue(addr, tfjsonpath.New("build_id")),
					},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPtr(addr, "id", &id),
					resource.TestCheckResourceAttr(addr, "build_status", "ready"),
					captureAttr(addr, "build_id", &build2),
					func(*terraformState) error {
						if build2 == build1 {
							return fmt.Errorf("the update kept build %s", build1)
						}
						builds, err := b.client.ListTemplateBuilds(context.Background(), id)
						if err != nil || len(builds) != 2 {
							return fmt.Errorf("template %s has builds %+v (%v), want 2", id, builds, err)
						}
						return nil
					},
					// The sandbox is replaced (its command changed) and sees the new value.
					resource.TestCheckResourceAttr("dreadnode_sandbox.s", "exit_code", "0"),
				),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				// The API does not report a build's base or steps.
				ImportStateVerifyIgnore: []string{"from_image", "steps", "force", "timeouts"},
			},
			{
				// Deleted outside Terraform: the refresh drops it, the plan creates it.
				PreConfig: func() {
					if err := b.client.DeleteTemplate(context.Background(), id); err != nil {
						t.Fatal(err)
					}
				},
				Config:             cfg("baz"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// A build that fails is an error showing the build's error and its log
// (the step's own output), and leaves the template in the state, tainted,
// with its id; the next apply replaces it; destroy deletes it. A failed
// update keeps the previous arguments, and the template is built again by
// the next apply even when the configuration is back to them.
func TestAccTemplate_failedBuildShowsLog(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	dir := t.TempDir()
	name := accTemplateName("acc-tpl-fail")
	cfg := func(cmd string) string {
		return b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_template" "t" {
  name       = %q
  from_image = %q
  steps = [
    { type = "RUN", args = [%q] },
  ]
}
`, name, accBaseImage, cmd)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		WorkingDir:               dir,
		Steps: []resource.TestStep{
			{
				Config:      cfg("echo marker-in-the-build-log; exit 7"),
				ExpectError: wrapped(`(?s)Template build failed.*template build .* failed.*7.*Last \d+ lines of the build's log.*marker-in-the-build-log.*kept in state as tainted`),
			},
			{
				PreConfig: func() {
					a := requireTaintedWith(t, dir, "dreadnode_template", "t", "id", "build_id")
					if a["build_status"] != client.BuildError {
						t.Fatalf("build_status in state: %v, want error", a["build_status"])
					}
				},
				Config: cfg("echo fixed"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dreadnode_template.t", plancheck.ResourceActionDestroyBeforeCreate)},
				},
				Check: resource.TestCheckResourceAttr("dreadnode_template.t", "build_status", "ready"),
			},
			{
				// A failing update: an error with the log; the state keeps the
				// previous arguments and records the failed build.
				Config:      cfg("echo broken-update-marker; exit 4"),
				ExpectError: wrapped(`(?s)Template build failed.*broken-update-marker.*previous arguments`),
			},
			{
				// The configuration back as the state has it: the template
				// is still built again, since its last build failed.
				PreConfig: func() {
					_, a, err := stateInstance(dir, "dreadnode_template", "t")
					if err != nil || a["build_status"] != client.BuildError {
						t.Fatalf("after the failed update: build_status %v (%v), want error", a["build_status"], err)
					}
				},
				Config: cfg("echo fixed"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dreadnode_template.t", plancheck.ResourceActionUpdate)},
				},
				Check: resource.TestCheckResourceAttr("dreadnode_template.t", "build_status", "ready"),
			},
		},
	})
}

// Bad arguments fail the plan on the attribute, with the backend's rules.
func TestAccTemplate_planTimeErrors(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      b.providerConfig() + "resource \"dreadnode_template\" \"t\" {\n" + body + "\n}\n",
			PlanOnly:    true,
			ExpectError: wrapped(want),
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`from_image = "x"
cpu_count = 3`, `(?s)Invalid cpu_count.*cpu_count = 3.*Attribute cpu_count: CPU count must be 1 or an even number, got 3`),
			step(`from_image = "x"
cpu_count = 64`, `(?s)Invalid cpu_count.*Attribute cpu_count: CPU count must be at most 32, got 64`),
			step(`from_image = "x"
memory_mb = 64`, `(?s)Invalid memory_mb.*memory_mb = 64.*Attribute memory_mb: memory must be at least 128 MB, got 64`),
			step(`from_image = "x"
memory_mb = 257`, `(?s)Invalid memory_mb.*Attribute memory_mb: memory must be divisible by 2, got 257`),
			step(`from_image = "x"
from_template = "y"`, `(?s)Invalid Attribute Combination.*from_image.*from_template`),
			step(`name = "x"`, `(?s)Invalid Attribute Combination.*from_image.*from_template`),
			step(`from_image = "x"
name = "Bad Name"`, `(?s)with dreadnode_template.t.*name.*must be alias\[:tag\]`),
			step(`from_image = "x"
steps = [{ type = "COPY", args = ["a", "/b"] }]`, `(?s)COPY steps are not supported by dreadnode_template.*steps\[0\].type.*RUN step`),
			step(`from_image = "x"
steps = [{ type = "ENV", args = ["ONLY_KEY"] }]`, `(?s)Invalid ENV step.*steps\[0\].args.*pairs`),
		},
	})
}

// Terraform 1.12 imports a template by resource identity; the import plan
// adopts what the API does not report in place (TestAccTemplate_buildSandboxUpdateImport
// checks that the apply after an import builds nothing).
func TestAccTemplate_importByIdentity(t *testing.T) {
	useTerraformNext(t)
	b := testAccPreCheck(t, "")
	cfg := b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_template" "t" {
  name       = %q
  from_image = %q
  steps      = [{ type = "RUN", args = ["true"] }]
}
`, accTemplateName("acc-tpl-ident"), accBaseImage)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{Config: cfg},
			{
				ResourceName:    "dreadnode_template.t",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
				// The base and steps the API does not report are adopted
				// from the configuration in place.
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// terraform import adopts a template: the apply after it saves the base and
// steps from the configuration and builds nothing.
func TestAccTemplate_importAdoptsWithoutBuilding(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	r := newCLIRun(t, b.providerConfig()+fmt.Sprintf(`
resource "dreadnode_template" "t" {
  name       = %q
  from_image = %q
  steps      = [{ type = "ENV", args = ["A", "1"] }]
}
`, accTemplateName("acc-tpl-adopt"), accBaseImage))
	r.mustRun("apply", "-auto-approve", "-input=false", "-no-color")
	id, _ := r.state("dreadnode_template", "t")["id"].(string)
	if id == "" {
		t.Fatal("no template id in state after apply")
	}
	t.Cleanup(func() { _, _ = r.run("destroy", "-auto-approve", "-input=false", "-no-color") })
	r.mustRun("state", "rm", "dreadnode_template.t")
	r.mustRun("import", "-input=false", "-no-color", "dreadnode_template.t", id)
	out := r.mustRun("apply", "-auto-approve", "-input=false", "-no-color")
	if !wrapped(`0 added, 1 changed, 0 destroyed`).MatchString(out) {
		t.Fatalf("the apply after the import:\n%s", out)
	}
	builds, err := b.client.ListTemplateBuilds(context.Background(), id)
	if err != nil || len(builds) != 1 {
		t.Fatalf("template %s has builds %+v (%v) after the import's apply, want its one build", id, builds, err)
	}
	if out := r.mustRun("plan", "-input=false", "-no-color"); !wrapped(`No changes`).MatchString(out) {
		t.Fatalf("the plan after adopting:\n%s", out)
	}
}
