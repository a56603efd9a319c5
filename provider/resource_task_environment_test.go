package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
)

func taskEnvConfig(b *accBackend, greeting string, paused bool) string {
	return b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_task_environment" "test" {
  task_ref    = "tf-web"
  timeout_sec = 1800
  paused      = %t

  inputs = {
    greeting = %q
  }
}
`, paused, greeting)
}

// serviceAnswers checks that the environment's web service serves want.
func serviceAnswers(addr, want string) resource.TestCheckFunc {
	return func(s *terraformState) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok {
			return fmt.Errorf("%s not in state", addr)
		}
		url := rs.Primary.Attributes["service_urls.web.url"]
		if url == "" {
			return fmt.Errorf("%s has no service_urls.web.url", addr)
		}
		return eventually(30*time.Second, func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != want {
				return fmt.Errorf("GET %s: %d %q, want %q", url, resp.StatusCode, body, want)
			}
			return nil
		})
	}
}

func TestAccTaskEnvironment_lifecycle(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	const addr = "dreadnode_task_environment.test"
	var id, token string

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			// Create: building → provisioning → ready.
			{
				Config: taskEnvConfig(b, "hi from terraform", false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "state", "ready"),
					resource.TestCheckResourceAttr(addr, "paused", "false"),
					resource.TestCheckResourceAttrSet(addr, "execute_token"),
					// The service's address on the environment's network: no port is
					// published on the host's loopback or any other interface.
					resource.TestMatchResourceAttr(addr, "service_urls.web.host", regexp.MustCompile(`^(?:[0-9]{1,3}\.){3}[0-9]{1,3}$`)),
					resource.TestCheckResourceAttrWith(addr, "service_urls.web.host", func(v string) error {
						if strings.HasPrefix(v, "127.") {
							return fmt.Errorf("service_urls.web.host %s is a loopback address", v)
						}
						return nil
					}),
					resource.TestMatchResourceAttr(addr, "service_urls.web.port", regexp.MustCompile(`^[1-9][0-9]*$`)),
					resource.TestMatchResourceAttr(addr, "service_urls.web.url", regexp.MustCompile(`^http://(?:[0-9]{1,3}\.){3}[0-9]{1,3}:[0-9]+`)),
					resource.TestMatchResourceAttr(addr, "instruction", regexp.MustCompile(`The page is at http://(?:[0-9]{1,3}\.){3}[0-9]{1,3}:[0-9]+`)),
					resource.TestMatchResourceAttr(addr, "created_at", reRFC3339),
					serviceAnswers(addr, "hi from terraform"),
					captureAttr(addr, "id", &id),
					captureAttr(addr, "execute_token", &token),
				),
			},
			// Import: the execute token is unrecoverable.
			{
				ResourceName:            addr,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"execute_token", "timeouts"},
			},
			// paused changes in place.
			{
				Config: taskEnvConfig(b, "hi from terraform", true),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrEquals(addr, "id", &id),
					attrEquals(addr, "execute_token", &token),
					resource.TestCheckResourceAttr(addr, "state", "paused"),
					resource.TestCheckResourceAttr(addr, "paused", "true"),
				),
			},
			{
				Config: taskEnvConfig(b, "hi from terraform", false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrEquals(addr, "id", &id),
					attrEquals(addr, "execute_token", &token),
					resource.TestCheckResourceAttr(addr, "state", "ready"),
					serviceAnswers(addr, "hi from terraform"),
				),
			},
			// Any other change replaces it.
			{
				Config: taskEnvConfig(b, "second", false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers(addr, "id", &id),
					attrDiffers(addr, "execute_token", &token),
					serviceAnswers(addr, "second"),
					func(_ *terraformState) error { return b.environmentGone(id) },
				),
			},
		},
	})
}

func TestAccTaskEnvironment_pausedAtCreate(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	const addr = "dreadnode_task_environment.test"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{{
			Config: taskEnvConfig(b, "sleepy", true),
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr(addr, "state", "paused"),
				resource.TestCheckResourceAttr(addr, "paused", "true"),
				resource.TestCheckResourceAttrSet(addr, "execute_token"),
			),
		}},
	})
}

// failedCreateSteps: the create fails (ExpectError); the state then holds a
// tainted resource with its id and token (read from the state file, and a
// non-refresh plan replaces it); an empty configuration destroys what is
// left and nothing stays behind.
func failedCreateSteps(t *testing.T, b *accBackend, workingDir, cfg string, expect *regexp.Regexp) []resource.TestStep {
	const addr = "dreadnode_task_environment.test"
	var id string
	return []resource.TestStep{
		{
			Config:      cfg,
			ExpectError: expect,
		},
		{
			PreConfig: func() {
				a := requireTaintedWith(t, workingDir, "dreadnode_task_environment", "test", "id", "execute_token")
				id = a["id"].(string)
			},
			Config:             cfg,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				// The plan without refresh sees the tainted resource.
				PostApplyPreRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
			},
		},
		{
			Config: b.providerConfig(),
			Check: func(_ *terraformState) error {
				if id == "" {
					return fmt.Errorf("no environment id was captured")
				}
				if err := b.environmentGone(id); err != nil {
					return err
				}
				return b.noLiveTaskRecords("")
			},
		},
	}
}

func TestAccTaskEnvironment_buildFailsLeavesTainted(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	wd := t.TempDir()
	cfg := b.providerConfig() + `
resource "dreadnode_task_environment" "test" {
  task_ref = "tf-build-fails"
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		WorkingDir:               wd,
		CheckDestroy:             b.checkDestroy(),
		Steps:                    failedCreateSteps(t, b, wd, cfg, regexp.MustCompile(`(?s)failed:.*task build failed`)),
	})
}

func TestAccTaskEnvironment_createTimeoutLeavesTainted(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	wd := t.TempDir()
	cfg := b.providerConfig() + `
resource "dreadnode_task_environment" "test" {
  task_ref = "tf-never-healthy"

  timeouts {
    create = "5s"
  }
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		WorkingDir:               wd,
		CheckDestroy:             b.checkDestroy(),
		Steps:                    failedCreateSteps(t, b, wd, cfg, regexp.MustCompile(`timed out waiting for task environment`)),
	})
}

func TestAccTaskEnvironment_deletedOutsideTerraform(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	const addr = "dreadnode_task_environment.test"
	var id string
	cfg := taskEnvConfig(b, "again", false)
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
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					if err := b.client.DeleteEnvironment(ctx, b.Org, accWorkspace, id); err != nil {
						t.Fatalf("deleting task environment %s outside Terraform: %v", id, err)
					}
					if err := b.environmentGone(id); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers(addr, "id", &id),
					resource.TestCheckResourceAttr(addr, "state", "ready"),
				),
			},
		},
	})
}

func TestAccTaskEnvironment_unknownTask(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, testdataDir(t, "tasks"))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: b.providerConfig() + `
resource "dreadnode_task_environment" "test" {
  task_ref = "no-such-task"
}
`,
			// Caught at plan, on the attribute, with the server's detail.
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Unknown task.*with dreadnode_task_environment.test.*task_ref.*HTTP 404.*no-such-task`),
		}},
	})
}
