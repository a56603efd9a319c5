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

// A sandbox whose command fails after the apply does not vanish silently:
// the refresh warns with the server's diagnostic (the exit code), removes it
// from state, and the plan re-creates it.
func TestAccSandbox_commandFailsOutsideApplyWarns(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	r := newCLIRun(t, b.providerConfig()+`
resource "dreadnode_sandbox" "job" {
  timeout = 300
  command = ["sh", "-c", "sleep 6; exit 3"]
}
`)
	r.mustRun("apply", "-auto-approve", "-input=false", "-no-color")
	id, _ := r.state("dreadnode_sandbox", "job")["id"].(string)
	if id == "" {
		t.Fatal("no sandbox id in state after apply")
	}
	if err := eventually(time.Minute, func() error { return b.expectSandboxState(id, client.SandboxFailed) }); err != nil {
		t.Fatal(err)
	}
	out := r.mustRun("plan", "-input=false", "-no-color")
	for _, want := range []string{
		fmt.Sprintf("Warning: Sandbox %s is failed", id),
		"exited with code 3",
		"It is removed from the state, so the next plan creates a new one",
		"1 to add, 0 to change, 0 to destroy",
	} {
		if !wrapped(regexp.QuoteMeta(want)).MatchString(out) {
			t.Fatalf("plan output lacks %q:\n%s", want, out)
		}
	}
}

// A command that fails right after the sandbox becomes running fails the
// apply with the exit code, and leaves the sandbox tainted.
func TestAccSandbox_commandFailingAtOnceFailsApply(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	dir := t.TempDir()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		WorkingDir:               dir,
		Steps: []resource.TestStep{
			{
				Config: b.providerConfig() + `
resource "dreadnode_sandbox" "job" {
  timeout = 300
  command = ["sh", "-c", "exit 3"]
}
`,
				ExpectError: wrapped(`(?s)Error waiting for sandbox to become running.*failed.*code 3.*kept in state as tainted`),
			},
			{
				// What the failed apply left: a tainted sandbox with its id.
				PreConfig: func() { requireTaintedWith(t, dir, "dreadnode_sandbox", "job", "id") },
				Config:    b.providerConfig(),
			},
		},
	})
}

// wait_for = "completed": a run-to-completion job. The apply waits for the
// command, the completed sandbox stays in state with its exit code, and the
// next plan is empty (the job runs once).
func TestAccSandbox_waitForCompleted(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.job"
	cfg := b.providerConfig() + `
resource "dreadnode_sandbox" "job" {
  timeout  = 300
  command  = ["sh", "-c", "sleep 1; echo done"]
  wait_for = "completed"
}
`
	var id string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "state", "completed"),
					resource.TestCheckResourceAttr(addr, "exit_code", "0"),
					captureAttr(addr, "id", &id),
					func(_ *terraformState) error { return b.expectSandboxState(id, client.SandboxCompleted) },
				),
			},
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// A failing job fails the apply with its exit code.
				Config: b.providerConfig() + `
resource "dreadnode_sandbox" "job" {
  timeout  = 300
  command  = ["sh", "-c", "exit 5"]
  wait_for = "completed"
}
`,
				ExpectError: wrapped(`(?s)Error waiting for sandbox to become completed.*code 5`),
			},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if sb, err := b.client.GetSandbox(ctx, id); err != nil || sb.ExitCode == nil || *sb.ExitCode != 0 {
		t.Fatalf("the first job: %+v, %v", sb, err)
	}
}
