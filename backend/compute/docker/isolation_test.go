package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// probeScript connects to every host:port argument at once (2 s each) and
// prints one "target result" line per target: connected, timeout, refused,
// noname (the name does not resolve) or error.
const probeScript = `
import socket, sys, threading
out = {}
def probe(t):
    host, port = t.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close(); out[t] = "connected"
    except socket.gaierror: out[t] = "noname"
    except socket.timeout: out[t] = "timeout"
    except ConnectionRefusedError: out[t] = "refused"
    except OSError as e: out[t] = "error"
ts = [threading.Thread(target=probe, args=(t,)) for t in sys.argv[1:]]
[t.start() for t in ts]; [t.join() for t in ts]
for t in sys.argv[1:]: print(t, out[t])
`

// probe runs probeScript in from and returns the result per target.
func probe(t *testing.T, p *Provider, from compute.Instance, targets ...string) map[string]string {
	t.Helper()
	res := exec(t, p, from, append([]string{"python3", "-c", probeScript}, targets...)...)
	if res.ExitCode != 0 {
		t.Fatalf("probe exited %d: %s", res.ExitCode, res.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	return got
}

// listening polls url from the host until it answers 200: the positive
// control that makes a refused connection from a sandbox meaningful.
func listening(t *testing.T, url string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// assertNothingPublished checks that no port of c is bound on the host.
func assertNothingPublished(t *testing.T, c container.InspectResponse) {
	t.Helper()
	if len(c.HostConfig.PortBindings) != 0 || c.HostConfig.PublishAllPorts {
		t.Errorf("%s: port bindings %v (publish all %v), want none", c.Name, c.HostConfig.PortBindings, c.HostConfig.PublishAllPorts)
	}
	for port, bindings := range c.NetworkSettings.Ports {
		if len(bindings) > 0 {
			t.Errorf("%s: port %s published on the host: %v", c.Name, port, bindings)
		}
	}
}

// taskService starts a container on a bridge network of its own, as the
// task engine starts a task service (inter-container traffic on, so the
// environment's services reach each other), and returns its name, alias
// and address.
func taskService(t *testing.T, p *Provider) (name, alias, ip string) {
	t.Helper()
	ctx := context.Background()
	suffix := randomHex(4)
	netName, name, alias := testNetwork+"-task-"+suffix, testNetwork+"-task-"+suffix+"-web", "web-"+suffix
	dockertest.CreateNetwork(t, p.cli, netName, network.CreateOptions{Driver: "bridge"})
	t.Cleanup(func() { _ = p.cli.NetworkRemove(context.Background(), netName) })
	resp, err := p.cli.ContainerCreate(ctx,
		&container.Config{Image: p.cfg.BaseImage, Cmd: []string{"python3", "-m", "http.server", "8080"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName)},
		&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{netName: {Aliases: []string{alias}}}}, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true})
	})
	if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := p.cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	return name, alias, c.NetworkSettings.Networks[netName].IPAddress
}

// TestSandboxesCannotReachEachOther: a sandbox of org A opens no TCP
// connection to another sandbox of org A or org B, nor to a task service, by
// name or by address, while the backend (the router's side) reaches every
// one of them and the probing sandbox reaches its own listener.
func TestSandboxesCannotReachEachOther(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	serve := func(org string) compute.Instance {
		spec := testSpec()
		spec.OrgID = org
		spec.Command = []string{"python3", "-m", "http.server", "8080"}
		return mustCreate(t, p, spec)
	}
	attacker, peerA, otherB := serve("org-a"), serve("org-a"), serve("org-b")
	taskName, taskAlias, taskIP := taskService(t, p)

	// Positive controls: every target listens (the backend reaches it), and
	// the probe connects where nothing stands in its way.
	for _, inst := range []compute.Instance{attacker, peerA, otherB} {
		listening(t, inst.Endpoints[8080].URL+"/")
	}
	listening(t, "http://"+taskIP+":8080/")
	self := attacker.Endpoints[8080].Host + ":8080"
	eventually(t, 30*time.Second, func() error {
		if got := probe(t, p, attacker, self)[self]; got != "connected" {
			return fmt.Errorf("the sandbox does not reach its own listener at %s: %s", self, got)
		}
		return nil
	})

	var targets []string
	for _, inst := range []compute.Instance{peerA, otherB} {
		targets = append(targets, containerName(inst.RecordID)+":8080", inst.Endpoints[8080].Host+":8080")
	}
	targets = append(targets, taskName+":8080", taskAlias+":8080", taskIP+":8080")
	for target, got := range probe(t, p, attacker, targets...) {
		if got == "connected" {
			t.Errorf("a sandbox of org-a connected to %s", target)
		}
	}

	for _, inst := range []compute.Instance{attacker, peerA, otherB} {
		c, err := p.cli.ContainerInspect(context.Background(), inst.Ref.ID)
		if err != nil {
			t.Fatal(err)
		}
		assertNothingPublished(t, c)
	}
}

// TestNetworkWithInterContainerTrafficIsRefused: an existing network that
// lets containers talk is never used for sandboxes.
func TestNetworkWithInterContainerTrafficIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testNetwork + "-icc-" + randomHex(4)
	p := newProvider(t, Config{Network: name})
	dockertest.CreateNetwork(t, p.cli, name, network.CreateOptions{Driver: "bridge"})
	t.Cleanup(func() { _ = p.cli.NetworkRemove(context.Background(), name) })
	spec := testSpec()
	cleanupRecord(t, p, spec.RecordID)
	_, err := p.Create(ctx, spec)
	wantKind(t, err, compute.KindNetwork)
	if !strings.Contains(err.Error(), "inter-container traffic is on") || !strings.Contains(err.Error(), "DOCKER_NETWORK") {
		t.Fatalf("error does not say why and what to do: %v", err)
	}
	if _, err := p.cli.ContainerInspect(ctx, containerName(spec.RecordID)); err == nil {
		t.Fatal("a container was created on the refused network")
	}
}

// TestNetworkPerDeployment: without DOCKER_NETWORK, each deployment gets a
// network of its own, with inter-container traffic off, removed when its
// backend closes with no sandbox on it.
func TestNetworkPerDeployment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	scope := "test-" + randomHex(4)
	p, err := New(Config{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := "dreadnode-" + scope
	if p.cfg.Network != want {
		t.Fatalf("network %q, want %q", p.cfg.Network, want)
	}
	t.Cleanup(func() { _ = p.cli.NetworkRemove(context.Background(), want) })
	spec := testSpec()
	inst, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.cli.NetworkInspect(ctx, want, network.InspectOptions{})
	if err != nil || n.Options[iccOption] != "false" || n.Internal {
		t.Fatalf("network %s: options %v internal %v, %v", want, n.Options, n.Internal, err)
	}
	if _, ok := n.Containers[inst.Ref.ID]; !ok {
		t.Fatalf("sandbox not on %s: %v", want, n.Containers)
	}
	if err := p.Delete(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	cli := newProvider(t, Config{}).cli
	if _, err := cli.NetworkInspect(ctx, want, network.InspectOptions{}); err == nil {
		t.Fatalf("network %s outlived its unused deployment", want)
	}
}

// TestLeftoverDeploymentNetworksArePruned: the unused network of a
// deployment whose backend died is removed by the next backend's first
// create; one a container still uses stays.
func TestLeftoverDeploymentNetworksArePruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cli := newProvider(t, Config{}).cli
	leftover := func(scope string) string {
		name := networkOf(scope)
		dockertest.CreateNetwork(t, cli, name, network.CreateOptions{Driver: "bridge",
			Labels: map[string]string{compute.LabelManaged: "true", labelScope: scope}})
		t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), name) })
		return name
	}
	deadScope, idleScope := "test-dead-"+randomHex(4), "test-idle-"+randomHex(4)
	dead, busy, idle := leftover(deadScope), leftover("test-busy-"+randomHex(4)), leftover(idleScope)
	// A killed backend leaves its deployment's lock file, held by no one; a
	// live but idle one holds it (liveness.go).
	killed := holdDeployment(deadScope)
	killed()
	live := holdDeployment(idleScope)
	defer live()
	t.Cleanup(func() { os.Remove(deploymentLockPath(deadScope)); os.Remove(deploymentLockPath(idleScope)) })
	resp, err := cli.ContainerCreate(ctx, &container.Config{Image: DefaultBaseImage, Cmd: []string{"sleep", "600"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(busy)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}

	p, err := New(Config{Scope: "test-live-" + randomHex(4)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inst, err := p.Create(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Delete(ctx, inst.Ref) }()
	if _, err := cli.NetworkInspect(ctx, dead, network.InspectOptions{}); err == nil {
		t.Errorf("the unused network %s of a dead deployment was kept", dead)
	}
	if _, err := cli.NetworkInspect(ctx, busy, network.InspectOptions{}); err != nil {
		t.Errorf("the network %s, still used, was removed: %v", busy, err)
	}
	if _, err := cli.NetworkInspect(ctx, idle, network.InspectOptions{}); err != nil {
		t.Errorf("the empty network %s of a deployment still running was removed: %v", idle, err)
	}
}

// TestStartOnRemovedNetworkIsRetried: a network removed between a
// container's create and start (a created container does not hold it, so
// pruneNetworks or another replica's Close may remove it) makes Create
// start over on a fresh network instead of failing.
func TestStartOnRemovedNetworkIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testNetwork + "-gone-" + randomHex(4)
	p := newProvider(t, Config{Network: name})
	t.Cleanup(func() { _ = p.cli.NetworkRemove(context.Background(), name) })
	spec := testSpec()
	cleanupRecord(t, p, spec.RecordID)
	tmpl, image, _ := p.template(BaseTemplate)
	id, err := p.createContainer(ctx, containerName(spec.RecordID), image, tmpl.Ports, map[string]string{compute.LabelManaged: "true"},
		nil, nil, 1, 128, false, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cli.NetworkRemove(ctx, name); err != nil {
		t.Fatal(err)
	}
	err = p.start(ctx, "create", id, false, nil)
	if !errors.Is(err, errNetworkGone) {
		t.Fatalf("start on a removed network: %v, want errNetworkGone", err)
	}
	if _, err := p.cli.ContainerInspect(ctx, id); err == nil {
		t.Fatal("the container of the failed start was kept")
	}
	// Create from the top: the cached id is stale, and Create recovers.
	inst, err := p.Create(ctx, spec)
	if err != nil || inst.Status != compute.StatusRunning {
		t.Fatalf("create after the network went: %+v %v", inst, err)
	}
}
