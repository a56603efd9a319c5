package provider

import (
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// TestAccSandbox_fanOutQueues: `count = 20` on a backend with room for 4
// sandboxes (DREADNODE_CAPACITY_SANDBOXES=4) succeeds: the creates past the
// capacity are queued by admission (§7), Terraform waits through the queue,
// and each sandbox is a short job whose completion frees its room for the
// next (the provider refuses timeouts under 60 s at plan, so room cannot come
// from expiry). The completed jobs stay in state: the next plan is empty.
func TestAccSandbox_fanOutQueues(t *testing.T) {
	t.Parallel()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Fatalf("acceptance tests need %s=1 and the Terraform CLI: run them with make test or make testacc", resource.EnvTfAcc)
	}
	requireTerraform(t)
	requireDocker(t)
	bp := backendproc.Start(t, backendproc.Options{Env: map[string]string{
		"DREADNODE_CAPACITY_SANDBOXES": "4", "DREADNODE_RECONCILE_INTERVAL": "200ms"}})
	c, err := client.New(client.Config{BaseURL: bp.URL, APIKey: bp.APIKey, UserAgent: "terraform-provider-dreadnode/acctest"})
	if err != nil {
		t.Fatal(err)
	}
	b := &accBackend{Backend: bp, client: c}
	checks := []resource.TestCheckFunc{}
	for i := range 20 {
		checks = append(checks, resource.TestCheckResourceAttr(fmt.Sprintf("dreadnode_sandbox.fan.%d", i), "state", "completed"),
			resource.TestCheckResourceAttr(fmt.Sprintf("dreadnode_sandbox.fan.%d", i), "exit_code", "0"))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{{
			Config: b.providerConfig() + `
resource "dreadnode_sandbox" "fan" {
  count    = 20
  timeout  = 300
  command  = ["sh", "-c", "sleep 1"]
  wait_for = "completed"
}
`,
			Check: resource.ComposeAggregateTestCheckFunc(checks...),
		}},
	})
}
