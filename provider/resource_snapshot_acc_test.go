package provider

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// snapshotConfig is a sandbox that writes /marker, a snapshot of it named
// name and, with from, a job sandbox started from the snapshot that fails
// unless /marker is in its filesystem.
func snapshotConfig(b *accBackend, name string, from bool) string {
	cfg := b.providerConfig() + `
resource "dreadnode_sandbox" "src" {
  timeout = 600
  command = ["sh", "-c", "echo from-the-parent > /marker && exec sleep 3600"]
}
`
	if name == "" {
		cfg += `
resource "dreadnode_snapshot" "snap" {
  sandbox_id = dreadnode_sandbox.src.id
}
`
	} else {
		cfg += fmt.Sprintf(`
resource "dreadnode_snapshot" "snap" {
  sandbox_id = dreadnode_sandbox.src.id
  name       = %q
}
`, name)
	}
	if from {
		cfg += `
resource "dreadnode_sandbox" "from" {
  template = dreadnode_snapshot.snap.template_id
  timeout  = 300
  command  = ["sh", "-c", "grep -q from-the-parent /marker"]
  wait_for = "completed"
}
`
	}
	return cfg
}

// TestAccSnapshot_lifecycle snapshots a running sandbox and starts a
// sandbox from the snapshot (dreadnode_sandbox's template), which finds the
// parent's file; imports the snapshot; deletes it out of band (Read drops
// it, the plan takes a new one); renames it (a replacement); and checks
// after the destroy that the API lists no snapshot and Docker holds none of
// their images.
func TestAccSnapshot_lifecycle(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	ctx := context.Background()
	var id, id2, build, build2 string
	addr := "dreadnode_snapshot.snap"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: snapshotConfig(b, "acc-snap", true),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr(addr, "id", regexp.MustCompile(`^[a-z0-9]+$`)),
					resource.TestCheckResourceAttrPair(addr, "template_id", addr, "id"),
					resource.TestCheckResourceAttrPair(addr, "sandbox_id", "dreadnode_sandbox.src", "id"),
					resource.TestCheckResourceAttr(addr, "name", "acc-snap"),
					resource.TestCheckResourceAttr(addr, "snapshot_id", "acc-snap:default"),
					resource.TestCheckResourceAttr(addr, "parent", "base"),
					resource.TestMatchResourceAttr(addr, "build_id", regexp.MustCompile(`^\S+$`)),
					resource.TestMatchResourceAttr(addr, "created_at", reRFC3339),
					resource.TestCheckResourceAttrWith(addr, "size_bytes", func(v string) error {
						if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
							return fmt.Errorf("size_bytes = %q, want > 0", v)
						}
						return nil
					}),
					// The job started from the snapshot found the parent's file.
					resource.TestCheckResourceAttrPair("dreadnode_sandbox.from", "template", addr, "template_id"),
					resource.TestCheckResourceAttr("dreadnode_sandbox.from", "state", client.SandboxCompleted),
					resource.TestCheckResourceAttr("dreadnode_sandbox.from", "exit_code", "0"),
					// The parent keeps running.
					resource.TestCheckResourceAttr("dreadnode_sandbox.src", "state", client.SandboxRunning),
					captureAttr(addr, "id", &id),
					captureAttr(addr, "build_id", &build),
					func(*terraformState) error { return snapshotImages(build, true) },
				),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				// Without the job: only the snapshot and its sandbox remain.
				Config: snapshotConfig(b, "acc-snap", false),
			},
			{
				// Deleted outside Terraform: Read drops it, the plan takes a new one.
				PreConfig: func() {
					if err := b.client.DeleteSnapshot(ctx, id); err != nil {
						t.Fatal(err)
					}
				},
				Config: snapshotConfig(b, "acc-snap", false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
						plancheck.ExpectResourceAction("dreadnode_sandbox.src", plancheck.ResourceActionNoop),
					},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers(addr, "id", &id),
					captureAttr(addr, "id", &id2),
					captureAttr(addr, "build_id", &build2),
					func(*terraformState) error { return b.snapshotGone(id, build) },
				),
			},
			{
				// A new name replaces it; no name is an unnamed snapshot.
				Config: snapshotConfig(b, "", false),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers(addr, "id", &id2),
					resource.TestCheckNoResourceAttr(addr, "name"),
					func(s *terraformState) error {
						id := s.RootModule().Resources[addr].Primary.ID
						return resource.TestCheckResourceAttr(addr, "snapshot_id", id+":default")(s)
					},
					func(*terraformState) error { return b.snapshotGone(id2, build2) },
				),
			},
		},
	})
}

// TestAccSnapshot_sandboxNotRunning: a snapshot of an unknown sandbox fails
// the apply on sandbox_id with the API's 404 and what to do.
func TestAccSnapshot_sandboxNotRunning(t *testing.T) {
	t.Parallel()
	b := testAccPreCheck(t, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{{
			Config: b.providerConfig() + `
resource "dreadnode_snapshot" "snap" {
  sandbox_id = "nosuchsandbox"
}
`,
			ExpectError: wrapped(`(?s)Error creating snapshot.*HTTP 404.*snapshot a running or paused sandbox`),
		}},
	})
}

// snapshotGone checks that the API no longer lists snapshot id and that no
// image of its build is left.
func (b *accBackend) snapshotGone(id, buildID string) error {
	return eventually(30*time.Second, func() error {
		if sn, err := b.client.GetSnapshot(context.Background(), id); !client.IsNotFound(err) {
			return fmt.Errorf("snapshot %s after destroy: %+v, %v; want not listed", id, sn, err)
		}
		return snapshotImages(buildID, false)
	})
}

// snapshotImages checks that Docker holds an image of snapshot build
// buildID (want) or none.
func snapshotImages(buildID string, want bool) error {
	if buildID == "" {
		return fmt.Errorf("no build id")
	}
	out, err := exec.Command("docker", "image", "ls", "-q", "--filter", "label=dev.dreadnode.build="+buildID).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker image ls: %v: %s", err, out)
	}
	has := strings.TrimSpace(string(out)) != ""
	switch {
	case want && !has:
		return fmt.Errorf("no Docker image of snapshot build %s", buildID)
	case !want && has:
		return fmt.Errorf("Docker images %s of snapshot build %s are left", strings.Fields(string(out)), buildID)
	}
	return nil
}

// Terraform 1.12 imports volumes and snapshots by resource identity (an
// import block with identity = { id = ... }).
func TestAccVolumeSnapshot_importByIdentity(t *testing.T) {
	useTerraformNext(t)
	b := testAccPreCheck(t, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{Config: snapshotConfig(b, "acc-identity", false) + `
resource "dreadnode_volume" "data" {
  name = "acc-identity"
}
`},
			{
				ResourceName:    "dreadnode_volume.data",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
			{
				ResourceName:    "dreadnode_snapshot.snap",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
		},
	})
}
