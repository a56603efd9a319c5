package provider

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccExamples applies every example of the documentation
// (examples/resources/*/resource.tf, examples/data-sources/*/data-source.tf)
// against a backend with the repository's task catalog, the provider being
// configured by the DREADNODE_* environment variables as the examples say.
func TestAccExamples(t *testing.T) {
	b := testAccPreCheck(t, "") // not parallel: it sets the environment
	b.setProviderEnv(t)
	root := filepath.Join("..", "examples")
	var files []string
	for _, pattern := range []string{"resources/*/resource.tf", "data-sources/*/data-source.tf"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 6 {
		t.Fatalf("found only %d examples: %v", len(files), files)
	}
	b.applyExamples(t, root, files)
}

// applyExamples applies each example file (a subtest named by its path
// under root) and checks that its destroy leaves nothing behind.
func (b *accBackend) applyExamples(t *testing.T, root string, files []string) {
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(filepath.ToSlash(rel), func(t *testing.T) {
			cfg, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				CheckDestroy:             b.checkDestroy(),
				Steps:                    []resource.TestStep{{Config: string(cfg)}},
			})
		})
	}
}
