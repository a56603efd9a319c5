package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func sandboxConfig(b *accBackend, timeout int, paused bool) string {
	return b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_sandbox" "test" {
  template = "base"
  timeout  = %d
  paused   = %t

  env_vars = {
    GREETING = "hello"
  }
  metadata = {
    suite = "acc-sandbox"
  }
  resources = {
    cpu_count = 1
    memory_mb = 256
  }
}
`, timeout, paused)
}

func TestAccSandbox_lifecycle(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	var id, token, endAt string

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			// Create and read.
			{
				Config: sandboxConfig(b, 300, false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "state", "running"),
					resource.TestCheckResourceAttr(addr, "paused", "false"),
					resource.TestCheckResourceAttr(addr, "template", "base"),
					resource.TestCheckResourceAttr(addr, "cpu_count", "1"),
					resource.TestCheckResourceAttr(addr, "memory_mb", "256"),
					resource.TestCheckResourceAttr(addr, "metadata.suite", "acc-sandbox"),
					resource.TestMatchResourceAttr(addr, "started_at", reRFC3339),
					resource.TestMatchResourceAttr(addr, "end_at", reRFC3339),
					resource.TestMatchResourceAttr(addr, "envd_url", regexp.MustCompile(`^http://`)),
					captureAttr(addr, "id", &id),
					captureAttr(addr, "access_token", &token),
					captureAttr(addr, "end_at", &endAt),
				),
			},
			// Import: the access token and the arguments the API never
			// returns cannot be recovered.
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				// timeout is reported by the API, so it is verified too.
				ImportStateVerifyIgnore: []string{"access_token", "env_vars", "resources", "timeouts"},
			},
			// timeout changes in place.
			{
				Config: sandboxConfig(b, 600, false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrEquals(addr, "id", &id),
					attrEquals(addr, "access_token", &token),
					resource.TestCheckResourceAttr(addr, "timeout", "600"),
					attrDiffers(addr, "end_at", &endAt),
				),
			},
			// paused = true pauses in place and keeps the token.
			{
				Config: sandboxConfig(b, 600, true),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrEquals(addr, "id", &id),
					attrEquals(addr, "access_token", &token),
					resource.TestCheckResourceAttr(addr, "state", "paused"),
					resource.TestCheckResourceAttr(addr, "paused", "true"),
					func(_ *terraformState) error { return b.expectSandboxState(id, client.SandboxPaused) },
				),
			},
			// paused = false resumes in place (connect) with a new token.
			{
				Config: sandboxConfig(b, 600, false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrEquals(addr, "id", &id),
					attrDiffers(addr, "access_token", &token),
					resource.TestCheckResourceAttr(addr, "state", "running"),
					resource.TestCheckResourceAttr(addr, "paused", "false"),
					func(_ *terraformState) error { return b.expectSandboxState(id, client.SandboxRunning) },
				),
			},
			// Any other change replaces it.
			{
				Config: b.providerConfig() + `
resource "dreadnode_sandbox" "test" {
  template = "base"
  timeout  = 600
  metadata = {
    suite = "acc-sandbox-2"
  }
}
`,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers(addr, "id", &id),
					func(_ *terraformState) error { return b.sandboxGone(id) },
				),
			},
		},
	})
}

func TestAccSandbox_pausedAtCreate(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{{
			Config: b.providerConfig() + `
resource "dreadnode_sandbox" "test" {
  timeout = 120
  paused  = true
}
`,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr(addr, "state", "paused"),
				resource.TestCheckResourceAttr(addr, "paused", "true"),
				resource.TestCheckResourceAttr(addr, "template", "base"),
				resource.TestCheckResourceAttrSet(addr, "access_token"),
			),
		}},
	})
}

func TestAccSandbox_deletedOutsideTerraform(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	var id string
	cfg := b.providerConfig() + `
resource "dreadnode_sandbox" "test" {
  timeout = 300
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check:  captureAttr(addr, "id", &id),
			},
			{
				PreConfig: func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					if err := b.client.DeleteSandbox(ctx, id); err != nil {
						t.Fatalf("deleting sandbox %s outside Terraform: %v", id, err)
					}
					if err := b.sandboxGone(id); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers(addr, "id", &id),
					resource.TestCheckResourceAttr(addr, "state", "running"),
				),
			},
		},
	})
}

// TestAccSandbox_expiredIsRecreated: a sandbox whose timeout ran out is
// deleted by the backend; the next plan re-creates it.
func TestAccSandbox_expiredIsRecreated(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	var id string
	cfg := func(timeout int) string {
		return b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_sandbox" "test" {
  timeout = %d
}
`, timeout)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: cfg(60),
				Check:  captureAttr(addr, "id", &id),
			},
			{
				PreConfig: func() {
					// The provider accepts the server's default bounds (60 s
					// at least); the test backend accepts 1 s, set here.
					if err := b.client.SetSandboxTimeout(context.Background(), id, 1); err != nil {
						t.Fatal(err)
					}
					if err := eventually(2*time.Minute, func() error {
						sb, err := b.client.GetSandbox(context.Background(), id)
						if err == nil && !client.SandboxGone(sb.State) {
							return fmt.Errorf("sandbox %s still %s", id, sb.State)
						}
						return nil
					}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg(300),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: attrDiffers(addr, "id", &id),
			},
		},
	})
}

// expectSandboxState checks the sandbox's state through the API.
func (b *accBackend) expectSandboxState(id, want string) error {
	sb, err := b.client.GetSandbox(context.Background(), id)
	if err != nil {
		return err
	}
	if sb.State != want {
		return fmt.Errorf("sandbox %s is %s in the API, want %s", id, sb.State, want)
	}
	return nil
}

// TestAccSandbox_importAdoptsConfiguration: after importing a sandbox made
// outside Terraform, the arguments the API cannot report are adopted from the
// configuration in place (no replacement), and the plan is then empty.
func TestAccSandbox_importAdoptsConfiguration(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	timeout, cpu, mem := 300, 1, 256
	sb := b.createSandboxOutside(t, client.SandboxCreate{
		TemplateID: "base", Timeout: &timeout, EnvVars: map[string]string{"GREETING": "hello"},
		Metadata: map[string]string{"suite": "acc-sandbox"}, Resources: &client.SandboxResources{CPUCount: &cpu, MemoryMB: &mem},
	})
	cfg := sandboxConfig(b, 300, false)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config:             cfg,
				ResourceName:       addr,
				ImportState:        true,
				ImportStateId:      sb.SandboxID,
				ImportStatePersist: true,
			},
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", sb.SandboxID),
					resource.TestCheckResourceAttr(addr, "resources.cpu_count", "1"),
					resource.TestCheckResourceAttr(addr, "env_vars.GREETING", "hello"),
					resource.TestCheckResourceAttr(addr, "state", "running"),
				),
			},
		},
	})
}

// createSandboxOutside creates a sandbox through the API (as if outside
// Terraform), deletes it when the test ends, and returns it once running.
func (b *accBackend) createSandboxOutside(t *testing.T, in client.SandboxCreate) *client.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := b.client.CreateSandbox(ctx, in, client.NewIdempotencyKey())
	if err != nil {
		t.Fatal(err)
	}
	// Should the test fail before Terraform manages it, delete it anyway
	// (cleanups run before the backend's own, registered earlier, stops it).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.client.DeleteSandbox(ctx, sb.SandboxID); err != nil && !client.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
	running, err := waitSandbox(ctx, b.client, sb.SandboxID, client.SandboxRunning, sb)
	if err != nil {
		t.Fatal(err)
	}
	return running
}
