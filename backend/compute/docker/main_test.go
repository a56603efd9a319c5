package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

// testNetwork prefixes every network this test binary creates, so parallel
// runs (and the real "dreadnode" network) never interfere.
var testNetwork = "dn-test-" + randomHex(4)

// testAgentSeed is the agents' token seed of every provider and Groups of
// this test binary (agenttoken.go), as one database gives every backend
// of a deployment one.
var testAgentSeed = randomHex(32)

// testImagePrefix names the images tests derive from the base image; they are
// removed when the run ends.
const testImagePrefix = "dreadnode/test-"

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err := images.EnsureBaseImage(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "docker provider tests:", err)
		os.Exit(1)
	}
	// Create the shared test networks up front: the tests use one provider
	// each, and providers only serialise network creation among themselves.
	if p, err := New(testConfig(Config{Network: testNetwork})); err == nil {
		for _, internal := range []bool{false, true} {
			name := testNetwork + map[bool]string{true: "-isolated"}[internal]
			if _, err := p.ensureNetwork(context.Background(), name, internal); err != nil {
				fmt.Fprintln(os.Stderr, "docker provider tests:", err)
				os.Exit(1)
			}
		}
		_ = p.Close()
	}
	code := m.Run()
	agentbin.Cleanup()
	removeTestNetworks()
	removeTestImages()
	os.Exit(code)
}

func removeTestNetworks() {
	p, err := New(Config{})
	if err != nil {
		return
	}
	defer p.Close()
	ctx := context.Background()
	nets, _ := p.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", testNetwork))})
	for _, n := range nets {
		if strings.HasPrefix(n.Name, testNetwork) {
			if p.cli.NetworkRemove(ctx, n.ID) == nil && p.egress.fw != nil {
				_ = p.egress.fw.DetachNetwork(ctx, bridgeOf(n)) // the network's egress chain goes with it
			}
		}
	}
}

func removeTestImages() {
	p, err := New(Config{})
	if err != nil {
		return
	}
	defer p.Close()
	ctx := context.Background()
	imgs, _ := p.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", testImagePrefix+"*"))})
	for _, img := range imgs {
		_, _ = p.cli.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	}
}

// noAgent as Config.AgentBinary makes newProvider leave the agent out.
const noAgent = "none"

// testConfig puts the networks cfg's provider creates in the tests' subnet
// pool, a /24 each: a test binary keeps some forty until it ends, most of
// the default pool's 64 /22s, and several binaries share one engine.
func testConfig(cfg Config) Config {
	if cfg.NetworkPool == "" {
		cfg.NetworkPool = dockertest.SubnetPool
		cfg.networkBits = dockertest.SubnetBits
	}
	return cfg
}

// newProvider returns a provider on this binary's test network.
func newProvider(t testing.TB, cfg Config) *Provider {
	t.Helper()
	if cfg.Network == "" {
		cfg.Network = testNetwork
	}
	cfg = testConfig(cfg)
	switch cfg.AgentBinary {
	case "": // injected by default, as the backend does
		cfg.AgentBinary = agentbin.Path(t)
	case noAgent:
		cfg.AgentBinary = ""
	}
	if cfg.AgentTokenSeed == "" {
		cfg.AgentTokenSeed = testAgentSeed // the test binary's providers are one deployment's backends
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// testSpec returns a spec with a fresh record id.
func testSpec() compute.Spec {
	return compute.Spec{RecordID: "t-" + randomHex(6), OrgID: "org-test", Kind: "runtime"}
}

// mustCreate creates an instance and deletes it when the test ends.
func mustCreate(t testing.TB, p *Provider, spec compute.Spec) compute.Instance {
	t.Helper()
	if spec.RecordID == "" {
		spec.RecordID = testSpec().RecordID
	}
	cleanupRecord(t, p, spec.RecordID)
	inst, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return inst
}

// cleanupRecord removes the record's container (by name, so it also covers
// containers a failed test never got a Ref for) when the test ends.
func cleanupRecord(t testing.TB, p *Provider, recordID string) {
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), compute.Ref{ID: containerName(recordID)}); err != nil {
			t.Errorf("cleanup of %s: %v", recordID, err)
		}
	})
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		<-tick.C
	}
}

func wantKind(t testing.TB, err error, kind compute.Kind) {
	t.Helper()
	if got := compute.KindOf(err); got != kind {
		t.Fatalf("want error kind %s, got %s (%v)", kind, got, err)
	}
	var pe *compute.Error
	if !errors.As(err, &pe) || pe.Msg == "" {
		t.Fatalf("want a *compute.Error with a message, got %#v", err)
	}
}

func exec(t testing.TB, p *Provider, inst compute.Instance, cmd ...string) compute.ExecResult {
	t.Helper()
	res, err := p.Exec(context.Background(), inst.Ref, compute.ExecRequest{Cmd: cmd, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}
