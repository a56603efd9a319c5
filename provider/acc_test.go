package provider

// Acceptance-test harness: the real Terraform CLI drives the provider (served
// in-process) against a real backend process on the real Docker engine.
//
// Run with TF_ACC=1. Terraform is TF_ACC_TERRAFORM_PATH, else `terraform` on
// PATH, else $GOPATH/bin/terraform; it is never downloaded. A missing
// Terraform or Docker fails the tests (they do not skip) when TF_ACC is set.
// Tests of features newer than Terraform 1.5.7 (ephemeral resources,
// write-only attributes, resource identity) run the CLI at
// TF_ACC_TERRAFORM_NEXT_PATH (`make terraform-next`) and fail without it.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// testAccProtoV6ProviderFactories serves the provider in-process for the
// Terraform CLI the tests run.
var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"dreadnode": providerserver.NewProtocol6WithError(New("test")()),
}

// accWorkspace is the workspace the acceptance tests use.
const accWorkspace = "acc"

func TestMain(m *testing.M) {
	_ = os.Setenv("CHECKPOINT_DISABLE", "1") // no version check calls from the CLI
	// Without a CLI configuration file Terraform warns on every command;
	// give it an empty one unless the configured one exists.
	emptyRC := ""
	rc := os.Getenv("TF_CLI_CONFIG_FILE")
	if rc == "" {
		home, _ := os.UserHomeDir()
		rc = filepath.Join(home, ".terraformrc")
	}
	if _, err := os.Stat(rc); err != nil {
		if f, err := os.CreateTemp("", "dreadnode-acc-terraformrc"); err == nil {
			f.Close()
			emptyRC = f.Name()
			_ = os.Setenv("TF_CLI_CONFIG_FILE", emptyRC)
		}
	}
	code := m.Run()
	if emptyRC != "" {
		os.Remove(emptyRC)
	}
	os.Exit(code)
}

// accBackend is a backend for one acceptance test.
type accBackend struct {
	*backendproc.Backend
	client *client.Client
}

// testAccPreCheck fails unless TF_ACC is set, then fails (never skips) when
// Terraform or Docker is missing, and starts a backend with the given task
// catalog (default: the repository's tasks/).
func testAccPreCheck(t *testing.T, tasksDir string) *accBackend {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Fatalf("acceptance tests need %s=1 and the Terraform CLI: run them with make test or make testacc", resource.EnvTfAcc)
	}
	requireTerraform(t)
	requireDocker(t)
	b := backendproc.Start(t, backendproc.Options{TasksDir: tasksDir})
	c, err := client.New(client.Config{BaseURL: b.URL, APIKey: b.APIKey, UserAgent: "terraform-provider-dreadnode/acctest"})
	if err != nil {
		t.Fatal(err)
	}
	return &accBackend{Backend: b, client: c}
}

// requireTerraform points TF_ACC_TERRAFORM_PATH at a local Terraform CLI or
// fails the test; terraform-plugin-testing would otherwise download one.
func requireTerraform(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC_TERRAFORM_VERSION") != "" {
		t.Fatal("TF_ACC_TERRAFORM_VERSION makes terraform-plugin-testing download Terraform; unset it and set TF_ACC_TERRAFORM_PATH")
	}
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			t.Fatalf("TF_ACC_TERRAFORM_PATH=%s is not an executable file (%v)", p, err)
		}
		return
	}
	candidates := []string{}
	if p, err := exec.LookPath("terraform"); err == nil {
		candidates = append(candidates, p)
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	candidates = append(candidates, filepath.Join(gopath, "bin", "terraform"))
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			// Process-wide, set once; every test resolves the same binary.
			_ = os.Setenv("TF_ACC_TERRAFORM_PATH", p)
			return
		}
	}
	t.Fatalf("acceptance tests need the Terraform CLI: set TF_ACC_TERRAFORM_PATH or put terraform on PATH (tried %s); install it with `go install github.com/hashicorp/terraform@v1.5.7`", strings.Join(candidates, ", "))
}

// requireDocker fails the test when the Docker engine does not answer.
func requireDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		t.Fatalf("acceptance tests need a running Docker engine (docker version: %v: %s)", err, strings.TrimSpace(string(out)))
	}
}

// providerConfig is a provider block for the backend.
func (b *accBackend) providerConfig() string {
	return fmt.Sprintf(`
provider "dreadnode" {
  api_url   = %q
  api_key   = %q
  org       = %q
  workspace = %q
}
`, b.URL, b.APIKey, b.Org, accWorkspace)
}

// setProviderEnv exports the DREADNODE_* variables for configurations
// without a provider block (the examples). Tests using it cannot be parallel.
func (b *accBackend) setProviderEnv(t *testing.T) {
	t.Setenv(EnvAPIURL, b.URL)
	t.Setenv(EnvAPIKey, b.APIKey)
	t.Setenv(EnvOrg, b.Org)
	t.Setenv(EnvWorkspace, accWorkspace)
}

func testdataDir(t *testing.T, parts ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ---------------------------------------------------------------------------
// State file inspection (for the step after an ExpectError step, whose
// checks Terraform does not run): the TestCase's WorkingDir holds the
// working directory "work*" with terraform.tfstate.

type tfStateFile struct {
	Resources []struct {
		Mode      string `json:"mode"`
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			Status     string         `json:"status"`
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// stateInstance returns the status ("" or "tainted") and attributes of the
// managed resource typ.name in the state file under workingDir.
func stateInstance(workingDir, typ, name string) (string, map[string]any, error) {
	files, _ := filepath.Glob(filepath.Join(workingDir, "work*", "terraform.tfstate"))
	if len(files) != 1 {
		return "", nil, fmt.Errorf("expected one state file under %s, found %v", workingDir, files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		return "", nil, err
	}
	var st tfStateFile
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", nil, err
	}
	for _, r := range st.Resources {
		if r.Mode == "managed" && r.Type == typ && r.Name == name && len(r.Instances) == 1 {
			return r.Instances[0].Status, r.Instances[0].Attributes, nil
		}
	}
	return "", nil, fmt.Errorf("%s.%s is not in the state", typ, name)
}

// requireTaintedWith fails unless typ.name is tainted in the state and holds
// non-empty values for attrs; it returns the attributes.
func requireTaintedWith(t *testing.T, workingDir, typ, name string, attrs ...string) map[string]any {
	t.Helper()
	status, a, err := stateInstance(workingDir, typ, name)
	if err != nil {
		t.Fatal(err)
	}
	if status != "tainted" {
		t.Fatalf("%s.%s has status %q in state, want tainted", typ, name, status)
	}
	for _, k := range attrs {
		if s, _ := a[k].(string); s == "" {
			t.Fatalf("%s.%s has no %s in state: %v", typ, name, k, a[k])
		}
	}
	return a
}

// ---------------------------------------------------------------------------
// Checks against the API and Docker.

// eventually polls f until it returns nil or the deadline passes.
func eventually(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	b := client.Doubling(100*time.Millisecond, time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(b.NextBackOff()) // polling interval, bounded by the deadline
	}
}

// noContainersFor checks that no container is left for a ledger/sandbox record.
func noContainersFor(recordID string) error {
	return noDockerObjects("container", "dev.dreadnode.record="+recordID)
}

// sandboxGone checks that the sandbox is deleted (or unknown) and that its
// containers are gone.
func (b *accBackend) sandboxGone(id string) error {
	err := eventually(30*time.Second, func() error {
		sb, err := b.client.GetSandbox(context.Background(), id)
		switch {
		case client.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case !client.SandboxGone(sb.State):
			return fmt.Errorf("sandbox %s is %s after destroy", id, sb.State)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return noContainersFor(id)
}

// environmentGone checks that the environment is torn down, failed or
// unknown, and that the org's ledger holds no live task record with
// containers left.
func (b *accBackend) environmentGone(id string) error {
	ctx := context.Background()
	err := eventually(30*time.Second, func() error {
		env, err := b.client.GetEnvironment(ctx, b.Org, accWorkspace, id)
		switch {
		case client.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case env.State != client.EnvTornDown && env.State != client.EnvFailed:
			return fmt.Errorf("task environment %s is %s after destroy", id, env.State)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := noDockerObjects("container", "dev.dreadnode.environment="+id); err != nil {
		return err
	}
	if err := noDockerObjects("network", "dev.dreadnode.environment="+id); err != nil {
		return err
	}
	return b.noLiveTaskRecords(id)
}

// noDockerObjects checks that no container or network (kind) carries label.
func noDockerObjects(kind, label string) error {
	return eventually(30*time.Second, func() error {
		args := []string{kind, "ls", "-q", "--filter", "label=" + label}
		if kind == "container" {
			args = append(args, "-a")
		}
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			return fmt.Errorf("%ss %v with %s are left after destroy", kind, ids, label)
		}
		return nil
	})
}

// noLiveTaskRecords checks the ledger: no task record of the org (of the
// environment envID, when given) is still starting, running or paused, and
// no container of such a record is left.
func (b *accBackend) noLiveTaskRecords(envID string) error {
	ctx := context.Background()
	return eventually(30*time.Second, func() error {
		recs, err := b.client.ListLedger(ctx, b.Org, nil)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.SandboxKind != "task" || (envID != "" && r.Metadata["environment_id"] != envID) {
				continue
			}
			if r.State != "killed" {
				return fmt.Errorf("ledger record %s (task) is %s after destroy", r.ID, r.State)
			}
			if err := noContainersFor(r.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkDestroy returns a CheckDestroy that verifies every resource of the
// provider left in the last state is gone from the API and Docker, and that
// the ledger holds no live task record.
func (b *accBackend) checkDestroy() resource.TestCheckFunc {
	return func(s *terraform.State) error {
		if err := b.noLiveTaskRecords(""); err != nil {
			return err
		}
		for _, rs := range s.RootModule().Resources {
			switch rs.Type {
			case "dreadnode_sandbox":
				if err := b.sandboxGone(rs.Primary.ID); err != nil {
					return err
				}
			case "dreadnode_task_environment":
				if err := b.environmentGone(rs.Primary.ID); err != nil {
					return err
				}
			case "dreadnode_api_key":
				if err := b.apiKeyRefused(rs.Primary.ID, rs.Primary.Attributes["key"]); err != nil {
					return err
				}
			case "dreadnode_volume":
				if err := b.volumeGone(rs.Primary.ID); err != nil {
					return err
				}
			case "dreadnode_snapshot":
				if err := b.snapshotGone(rs.Primary.ID, rs.Primary.Attributes["build_id"]); err != nil {
					return err
				}
			case "dreadnode_template":
				if err := b.templateGone(rs.Primary.ID); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// captureAttr stores an attribute's value for later steps.
func captureAttr(addr, attr string, into *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok {
			return fmt.Errorf("%s not in state", addr)
		}
		v, ok := rs.Primary.Attributes[attr]
		if !ok || v == "" {
			return fmt.Errorf("%s.%s is empty", addr, attr)
		}
		*into = v
		return nil
	}
}

// attrDiffers checks that an attribute is set and differs from *old.
func attrDiffers(addr, attr string, old *string) resource.TestCheckFunc {
	return resource.TestCheckResourceAttrWith(addr, attr, func(v string) error {
		if v == "" || v == *old {
			return fmt.Errorf("%s.%s = %q, want a new non-empty value (old %q)", addr, attr, v, *old)
		}
		return nil
	})
}

// attrEquals checks that an attribute equals *want (read when checked).
func attrEquals(addr, attr string, want *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		return resource.TestCheckResourceAttr(addr, attr, *want)(s)
	}
}

var reRFC3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)

type terraformState = terraform.State
