package provider

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// TestAccVolume_lifecycle makes a volume (its Docker volume exists),
// imports it, deletes it out of band (Read drops it, the plan makes a new
// one), renames it (a replacement), and shows that destroying a volume a
// sandbox mounts fails with the API's 409 naming the sandbox and what to
// do, then succeeds once the sandbox is deleted; CheckDestroy checks the
// API and Docker have no volume left.
func TestAccVolume_lifecycle(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	cfg := func(name string) string {
		return b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_volume" "data" {
  name = %q
}
`, name)
	}
	ctx := context.Background()
	var id, id2, sandboxID string
	// What the refused destroy says, once the sandbox's id is known.
	mounted := regexp.MustCompile(`^$`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: cfg("acc-data"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr("dreadnode_volume.data", "id", regexp.MustCompile(`^\S+$`)),
					resource.TestCheckResourceAttr("dreadnode_volume.data", "name", "acc-data"),
					resource.TestCheckResourceAttrSet("dreadnode_volume.data", "size_bytes"),
					resource.TestMatchResourceAttr("dreadnode_volume.data", "created_at", reRFC3339),
					captureAttr("dreadnode_volume.data", "id", &id),
					func(*terraformState) error { return dockerVolumeExists(id) },
				),
			},
			{
				ResourceName:      "dreadnode_volume.data",
				ImportState:       true,
				ImportStateVerify: true,
				// size_bytes is measured by the API at most once a minute.
				ImportStateVerifyIgnore: []string{"size_bytes"},
			},
			{
				// Deleted outside Terraform: Read drops it, the plan makes a new one.
				PreConfig: func() {
					if err := b.client.DeleteVolume(ctx, id); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("acc-data"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dreadnode_volume.data", plancheck.ResourceActionCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers("dreadnode_volume.data", "id", &id),
					captureAttr("dreadnode_volume.data", "id", &id2),
					func(*terraformState) error { return b.volumeGone(id) },
				),
			},
			{
				Config: cfg("acc-data-2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dreadnode_volume.data", plancheck.ResourceActionDestroyBeforeCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers("dreadnode_volume.data", "id", &id2),
					resource.TestCheckResourceAttr("dreadnode_volume.data", "name", "acc-data-2"),
					func(*terraformState) error { return b.volumeGone(id2) },
					captureAttr("dreadnode_volume.data", "id", &id),
				),
			},
			{
				// A sandbox mounts it: the destroy is refused with the API's
				// 409, which names the sandbox, and the diagnostic says what to do.
				PreConfig: func() {
					sb, err := b.client.CreateSandbox(ctx, client.SandboxCreate{
						VolumeMounts: []client.VolumeMount{{Name: "acc-data-2", Path: "/data", Shared: true}},
					}, client.NewIdempotencyKey())
					if err != nil {
						t.Fatal(err)
					}
					sandboxID = sb.SandboxID
					t.Cleanup(func() { _ = b.client.DeleteSandbox(context.Background(), sandboxID) })
					*mounted = *wrapped(`(?s)Volume is still mounted.*mounted by sandbox\(es\) .*` + regexp.QuoteMeta(sandboxID) +
						`.*Delete those sandboxes .*then run terraform destroy again`)
				},
				Config:      b.providerConfig(),
				ExpectError: mounted,
			},
			{
				PreConfig: func() {
					// The volume is kept while mounted.
					if _, err := b.client.GetVolume(ctx, id); err != nil {
						t.Fatalf("volume %s after the refused destroy: %v", id, err)
					}
					if err := b.client.DeleteSandbox(ctx, sandboxID); err != nil {
						t.Fatal(err)
					}
					if err := b.sandboxGone(sandboxID); err != nil {
						t.Fatal(err)
					}
				},
				Config: b.providerConfig(),
				Check:  func(*terraformState) error { return b.volumeGone(id) },
			},
		},
	})
}

// volumeGone checks that the API answers 404 for volume id and that its
// Docker volume is gone.
func (b *accBackend) volumeGone(id string) error {
	return eventually(30*time.Second, func() error {
		if _, err := b.client.GetVolume(context.Background(), id); !client.IsNotFound(err) {
			return fmt.Errorf("GET /volumes/%s after destroy: %v, want 404", id, err)
		}
		if err := dockerVolumeExists(id); err == nil {
			return fmt.Errorf("Docker volume dnvol-%s is left after destroy", id)
		}
		return nil
	})
}

// dockerVolumeExists checks that the Docker volume of org volume id exists.
func dockerVolumeExists(id string) error {
	out, err := exec.Command("docker", "volume", "inspect", "--format", "{{.Name}}", "dnvol-"+id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker volume inspect dnvol-%s: %v: %s", id, err, out)
	}
	return nil
}

// TestAccVolume_mountedBySandboxes: a sandbox writes into a dreadnode_volume
// it mounts (volume_mounts), a second one reads the file through a
// read-only mount; the destroy deletes the sandboxes before the volume (the
// reference orders it), so it is not refused, and nothing is left.
func TestAccVolume_mountedBySandboxes(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	cfg := b.providerConfig() + `
resource "dreadnode_volume" "shared" {
  name = "acc-shared"
}

resource "dreadnode_sandbox" "writer" {
  timeout = 300
  command = ["sh", "-c", "echo from-the-writer > /data/f && exec sleep 600"]
  volume_mounts = [{
    name = dreadnode_volume.shared.name
    path = "/data"
  }]
}

resource "dreadnode_sandbox" "reader" {
  depends_on = [dreadnode_sandbox.writer]
  timeout    = 300
  command    = ["sh", "-c", "grep -q from-the-writer /data/f && ! touch /data/g"]
  wait_for   = "completed"
  volume_mounts = [{
    name      = dreadnode_volume.shared.name
    path      = "/data"
    read_only = true
  }]
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("dreadnode_sandbox.writer", "state", client.SandboxRunning),
					resource.TestCheckResourceAttr("dreadnode_sandbox.reader", "state", client.SandboxCompleted),
					resource.TestCheckResourceAttr("dreadnode_sandbox.reader", "exit_code", "0"),
					resource.TestCheckResourceAttr("dreadnode_sandbox.reader", "volume_mounts.0.read_only", "true"),
				),
			},
			{
				// A mount of a volume the org does not have fails on its attribute.
				Config: b.providerConfig() + `
resource "dreadnode_sandbox" "lost" {
  timeout = 300
  volume_mounts = [{
    name = "nosuchvolume"
    path = "/data"
  }]
}
`,
				ExpectError: wrapped(`(?s)Error creating sandbox.*volume_mounts\[0\].*HTTP 400.*nosuchvolume`),
			},
		},
	})
}
