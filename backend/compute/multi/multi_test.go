package multi

import (
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

func TestParseRoutes(t *testing.T) {
	got, err := ParseRoutes(" gpu=e2b, local=docker ,")
	if err != nil || len(got) != 2 || got["gpu"] != "e2b" || got["local"] != "docker" {
		t.Fatalf("ParseRoutes: %v %v", got, err)
	}
	for _, bad := range []string{"gpu", "=e2b", "gpu=k8s"} {
		if _, err := ParseRoutes(bad); err == nil || !strings.Contains(err.Error(), "DREADNODE_TEMPLATE_PROVIDERS") {
			t.Errorf("ParseRoutes(%q) must fail naming the variable, got %v", bad, err)
		}
	}
}

type named struct{ compute.Provider }

func (named) Name() string { return "docker" }

func TestRoutesNeedTheirProvider(t *testing.T) {
	if _, err := New(named{}, nil, map[string]string{"gpu": "e2b"}); err == nil || !strings.Contains(err.Error(), `"e2b"`) {
		t.Fatalf("a route to an unconfigured provider must fail, got %v", err)
	}
	p, err := New(named{}, nil, map[string]string{"local": "docker"})
	if err != nil || p.ProviderFor("local") != "docker" || p.ProviderFor("other") != "docker" {
		t.Fatalf("routing: %v", err)
	}
}

// checking is a docker-named provider refusing every allowOut entry.
type checking struct{ named }

func (checking) CheckNetwork(_ string, n compute.Network) (string, string) {
	if len(n.AllowOut) > 0 {
		return "network.allowOut.0", "not here"
	}
	return "", ""
}

type e2bNamed struct{ compute.Provider }

func (e2bNamed) Name() string { return "e2b" }

// The network check is the routed provider's: a template going to a
// provider without a check passes, one going to a checking provider does not.
func TestCheckNetworkFollowsTheRoute(t *testing.T) {
	p, err := New(checking{}, []compute.Provider{e2bNamed{}}, map[string]string{"gpu": "e2b"})
	if err != nil {
		t.Fatal(err)
	}
	n := compute.Network{AllowOut: []string{"example.com"}}
	if f, _ := p.CheckNetwork("base", n); f != "network.allowOut.0" {
		t.Errorf("the default provider's check was skipped: %q", f)
	}
	if f, why := p.CheckNetwork("gpu", n); f != "" {
		t.Errorf("a template routed to e2b was checked by docker: %q %q", f, why)
	}
}
