package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// expectNoUnknowns is a plan check failing when the planned change of addr
// has any value "known after apply".
type expectNoUnknowns string

func (addr expectNoUnknowns) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != string(addr) {
			continue
		}
		if unknown := unknownPaths("", rc.Change.AfterUnknown); len(unknown) > 0 {
			resp.Error = fmt.Errorf("%s: values known only after apply: %v", addr, unknown)
		}
		return
	}
	resp.Error = fmt.Errorf("%s is not in the plan", addr)
}

// unknownPaths lists the paths an after_unknown value marks true.
func unknownPaths(prefix string, v any) []string {
	var out []string
	switch x := v.(type) {
	case bool:
		if x {
			out = append(out, prefix)
		}
	case map[string]any:
		for k, e := range x {
			out = append(out, unknownPaths(prefix+"."+k, e)...)
		}
	case []any:
		for i, e := range x {
			out = append(out, unknownPaths(fmt.Sprintf("%s[%d]", prefix, i), e)...)
		}
	}
	return out
}

// Pausing shows the state it reaches and nothing "known after apply";
// resuming shows the new token and lifetime as unknown.
func TestAccSandbox_pausePlanHasNoUnknowns(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	cfg := func(paused bool) string {
		return b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_sandbox" "test" {
  timeout = 300
  paused  = %t
}
`, paused)
	}
	var token string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{Config: cfg(false), Check: captureAttr(addr, "access_token", &token)},
			{
				Config: cfg(true),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						expectNoUnknowns(addr),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("state"), knownvalue.StringExact("paused")),
					},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "state", "paused"),
					attrEquals(addr, "access_token", &token),
				),
			},
			{
				Config: cfg(false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectUnknownValue(addr, tfjsonpath.New("access_token")),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("state"), knownvalue.StringExact("running")),
					},
				},
				Check: attrDiffers(addr, "access_token", &token),
			},
		},
	})
}

// After importing a sandbox whose configuration the API reports in full,
// the plan is empty: no follow-up apply, and the sandbox's lifetime is not
// reset.
func TestAccSandbox_importThenPlanIsEmpty(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	timeout := 900
	running := b.createSandboxOutside(t, client.SandboxCreate{
		TemplateID: "base", Timeout: &timeout, Metadata: map[string]string{"suite": "acc-import"},
	})
	cfg := b.providerConfig() + `
resource "dreadnode_sandbox" "test" {
  template = "base"
  timeout  = 900
  metadata = {
    suite = "acc-import"
  }
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config:             cfg,
				ResourceName:       addr,
				ImportState:        true,
				ImportStateId:      running.SandboxID,
				ImportStatePersist: true,
			},
			{
				Config:   cfg,
				PlanOnly: true, // fails unless the plan is empty
			},
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "timeout", "900"),
					resource.TestCheckResourceAttr(addr, "end_at", client.TimeText(running.EndAt)),
				),
			},
		},
	})
}

// A sandbox Terraform made, imported again, reads back as it was (timeout
// included: the API reports it; only the access token GET never shows and
// Terraform's own timeouts differ), so the imported state plans as the
// created one does: no change.
func TestAccSandbox_importVerifyThenPlanIsEmpty(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	cfg := b.providerConfig() + `
resource "dreadnode_sandbox" "test" {
  template    = "base"
  timeout     = 1200
  auto_resume = true
  metadata = {
    suite = "acc-import-verify"
  }
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{Config: cfg, Check: resource.TestCheckResourceAttr(addr, "timeout", "1200")},
			{
				Config:            cfg,
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				// GET never shows the access token; timeouts is Terraform's own.
				ImportStateVerifyIgnore: []string{"access_token", "timeouts"},
			},
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{Config: cfg, PlanOnly: true},
		},
	})
}
