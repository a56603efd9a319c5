package provider

// A thin runner of the real Terraform CLI for what terraform-plugin-testing
// cannot assert (warning diagnostics): the provider is served in-process in
// debug mode and Terraform reattaches to it, as terraform-plugin-testing does.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

// cliRun is one Terraform working directory driven by the CLI at
// TF_ACC_TERRAFORM_PATH against the in-process provider.
type cliRun struct {
	t         *testing.T
	dir       string
	terraform string
	reattach  string
}

// newCLIRun serves the provider for the test's lifetime and initialises dir
// with config.
func newCLIRun(t *testing.T, config string) *cliRun {
	t.Helper()
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		t.Fatal("TF_ACC_TERRAFORM_PATH is not set (testAccPreCheck sets it)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	reattachCh := make(chan *plugin.ReattachConfig, 1)
	closeCh := make(chan struct{})
	srv := providerserver.NewProtocol6(New("test")())()
	go func() {
		_ = tf6server.Serve(Address, func() tfprotov6.ProviderServer { return srv },
			tf6server.WithDebug(ctx, reattachCh, closeCh),
			tf6server.WithoutLogStderrOverride(),
			tf6server.WithLoggingSink(t),
			tf6server.WithGoPluginLogger(hclog.NewNullLogger()))
	}()
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattachCh:
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the provider did not start serving within 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-closeCh:
		case <-time.After(10 * time.Second):
			t.Error("the provider server did not stop within 10s")
		}
	})
	reattach, err := json.Marshal(map[string]any{Address: map[string]any{
		"Protocol": string(rc.Protocol), "ProtocolVersion": rc.ProtocolVersion, "Pid": rc.Pid, "Test": true,
		"Addr": map[string]string{"Network": rc.Addr.Network(), "String": rc.Addr.String()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := &cliRun{t: t, dir: t.TempDir(), terraform: tf, reattach: string(reattach)}
	r.write(config)
	r.mustRun("init", "-input=false", "-no-color")
	// Runs before the provider stops (cleanups run last-registered first).
	t.Cleanup(func() {
		if out, err := r.run("destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			t.Errorf("terraform destroy: %v\n%s", err, out)
		}
	})
	return r
}

// requiredProviders names the provider's source (Terraform would look for
// hashicorp/dreadnode otherwise).
const requiredProviders = `
terraform {
  required_providers {
    dreadnode = { source = "dreadnode/dreadnode" }
  }
}
`

// write replaces the configuration.
func (r *cliRun) write(config string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "main.tf"), []byte(requiredProviders+config), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// run runs terraform with args and returns its combined output.
func (r *cliRun) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.terraform, args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "TF_REATTACH_PROVIDERS="+r.reattach, "TF_IN_AUTOMATION=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *cliRun) mustRun(args ...string) string {
	r.t.Helper()
	out, err := r.run(args...)
	if err != nil {
		r.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// state returns the attributes of the managed resource typ.name in the
// working directory's state file.
func (r *cliRun) state(typ, name string) map[string]any {
	r.t.Helper()
	raw, err := os.ReadFile(filepath.Join(r.dir, "terraform.tfstate"))
	if err != nil {
		r.t.Fatal(err)
	}
	var st tfStateFile
	if err := json.Unmarshal(raw, &st); err != nil {
		r.t.Fatal(err)
	}
	for _, res := range st.Resources {
		if res.Mode == "managed" && res.Type == typ && res.Name == name && len(res.Instances) == 1 {
			return res.Instances[0].Attributes
		}
	}
	return nil
}
