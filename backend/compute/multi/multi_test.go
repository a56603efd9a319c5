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
