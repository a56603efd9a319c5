package provider

// Features newer than the CI's Terraform 1.5.7 (ephemeral resources 1.10,
// write-only attributes 1.11, resource identity 1.12) run with the CLI at
// TF_ACC_TERRAFORM_NEXT_PATH (`make terraform-next`). These tests set the
// process environment, so they are not parallel.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
)

// EnvTerraformNext names the newer Terraform CLI the tests below run.
const EnvTerraformNext = "TF_ACC_TERRAFORM_NEXT_PATH"

// useTerraformNext makes terraform-plugin-testing run the newer CLI for this
// test, or fails it when the CLI is missing.
func useTerraformNext(t *testing.T) {
	t.Helper()
	p := os.Getenv(EnvTerraformNext)
	if p == "" {
		t.Fatalf("%s is not set: this test needs Terraform >= 1.12; build it with `make terraform-next` and run the tests with make test or make testacc", EnvTerraformNext)
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s=%s is not an executable file (%v); build it with `make terraform-next`", EnvTerraformNext, p, err)
	}
	t.Setenv("TF_ACC_TERRAFORM_PATH", p)
}

// sandboxExec runs cmd in the sandbox with an access token and returns stdout.
func (b *accBackend) sandboxExec(id, token string, cmd ...string) (string, error) {
	body, _ := json.Marshal(map[string]any{"cmd": cmd})
	req, err := http.NewRequest(http.MethodPost, b.URL+"/sandboxes/"+id+"/exec", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("X-API-Key", b.APIKey)
	req.Header.Set("X-Access-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Stdout string `json:"stdout"`
		Detail string `json:"detail"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("exec: HTTP %d: %s", resp.StatusCode, out.Detail)
	}
	return out.Stdout, nil
}

// readState returns the raw state file of a TestCase's WorkingDir.
func readState(workingDir string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(workingDir, "work*", "terraform.tfstate"))
	if len(files) != 1 {
		return "", fmt.Errorf("expected one state file under %s, found %v", workingDir, files)
	}
	raw, err := os.ReadFile(files[0])
	return string(raw), err
}

// An ephemeral connection's token is used within one apply (by a
// provisioner) and never reaches the state; env_vars_wo reach the sandbox and
// not the state either.
func TestAccSandbox_ephemeralConnectionAndWriteOnlyEnv(t *testing.T) {
	useTerraformNext(t)
	b := testAccPreCheck(t, "")
	dir := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "token")
	secret := ids.Token("wo_secret")
	const addr = "dreadnode_sandbox.test"
	cfg := b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_sandbox" "test" {
  timeout = 300
  env_vars_wo = {
    SECRET = %q
  }
  env_vars_wo_version = 1
}

ephemeral "dreadnode_sandbox_connection" "test" {
  sandbox_id = dreadnode_sandbox.test.id
}

resource "terraform_data" "use" {
  triggers_replace = [dreadnode_sandbox.test.id]

  provisioner "local-exec" {
    command = "printf %%s \"$TOKEN\" > %s"
    environment = {
      TOKEN = ephemeral.dreadnode_sandbox_connection.test.access_token
    }
  }
}
`, secret, tokenFile)
	var id string
	check := func(s *terraform.State) error {
		id = s.RootModule().Resources[addr].Primary.ID
		raw, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("the provisioner did not write the connection's token: %v", err)
		}
		token := string(raw)
		if len(token) < 16 {
			return fmt.Errorf("the connection's token %q is too short", token)
		}
		// The token is live: it runs a command, which sees env_vars_wo.
		out, err := b.sandboxExec(id, token, "sh", "-c", `printf %s "$SECRET"`)
		if err != nil {
			return fmt.Errorf("exec with the connection's token: %v", err)
		}
		if out != secret {
			return fmt.Errorf("SECRET in the sandbox = %q, want the env_vars_wo value", out)
		}
		st, err := readState(dir)
		if err != nil {
			return err
		}
		for name, v := range map[string]string{"the connection's token": token, "the env_vars_wo value": secret} {
			if strings.Contains(st, v) {
				return fmt.Errorf("%s is in the state file", name)
			}
		}
		var parsed tfStateFile
		if err := json.Unmarshal([]byte(st), &parsed); err != nil {
			return err
		}
		for _, r := range parsed.Resources {
			if r.Type == "dreadnode_sandbox_connection" {
				return fmt.Errorf("the ephemeral resource is in the state file (mode %s)", r.Mode)
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		WorkingDir:               dir,
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr(addr, "env_vars_wo.%"),
					resource.TestCheckResourceAttr(addr, "env_vars_wo_version", "1"),
					check,
				),
			},
		},
	})
	if id == "" {
		t.Fatal("no sandbox was created")
	}
}

// Terraform 1.12 imports by resource identity (an import block with
// identity = { id = ... }).
func TestAccSandbox_importByIdentity(t *testing.T) {
	useTerraformNext(t)
	b := testAccPreCheck(t, "")
	const addr = "dreadnode_sandbox.test"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{Config: b.providerConfig() + `
resource "dreadnode_sandbox" "test" {
  template = "base"
  timeout  = 300
}
`},
			{
				ResourceName:    addr,
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
		},
	})
}

// The ephemeral resources' examples apply (with the newer CLI), the
// provider configured by the DREADNODE_* variables as the examples say.
func TestAccEphemeralExamples(t *testing.T) {
	useTerraformNext(t)
	b := testAccPreCheck(t, "")
	b.setProviderEnv(t)
	t.Setenv("TF_VAR_api_token", ids.Token("example"))
	root := filepath.Join("..", "examples")
	files, err := filepath.Glob(filepath.Join(root, "ephemeral-resources", "*", "ephemeral-resource.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ephemeral resource examples found (%v)", err)
	}
	b.applyExamples(t, root, files)
}
