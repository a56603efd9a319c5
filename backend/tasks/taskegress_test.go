package tasks_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/testhosts"
)

// Test hosts of TestTaskEgress: egress-declared's task.yaml declares A.
const (
	egressHostA = "10.254.42.2"
	egressHostB = "10.254.42.3"
)

// connects reports whether the environment's execute service opens a TCP
// connection to addr (a drop shows as a timeout).
func (h *harness) connects(id, token, ip string, port int) bool {
	h.t.Helper()
	r := h.execute("acme", "ws", id, token, map[string]any{"timeout_sec": 30, "command": []string{"python3", "-c",
		"import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print('open')", ip, fmt.Sprint(port)}})
	if r.Code != http.StatusOK {
		h.t.Fatalf("execute: %d %s", r.Code, r.Body)
	}
	return strings.Contains(r.JSON(h.t)["output"].(string), "open")
}

// hostListener listens on the host's address on environment id's bridge
// (its gateway), returning the address, the port and the bridge's name.
func (h *harness) hostListener(id string) (gw string, port int, bridge string) {
	h.t.Helper()
	nets := h.networks(id)
	if len(nets) != 1 {
		h.t.Fatalf("environment %s has networks %v", id, nets)
	}
	n, err := h.cli.NetworkInspect(context.Background(), nets[0].ID, network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 {
		h.t.Fatalf("inspect network: %v", err)
	}
	gw = n.IPAM.Config[0].Gateway
	if gw == "" {
		// Listening on ":0" would make every "not reached" below vacuous.
		h.t.Fatalf("network %s shows no gateway", nets[0].Name)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		h.t.Fatal(err)
	}
	return gw, testhosts.AcceptAll(h.t, ln), "br-" + n.ID[:12]
}

// TestTaskEgress: on a backend whose operator allows the test hosts'
// private range (so only the task's own policy stands between a service
// and them), a task declaring host A in network.allowOut reaches A but not
// B, nor the host's address on its bridge; ssrf-vault, which declares
// nothing, still solves (its gateway reaches the vault) while reaching
// neither test host nor the host. The bridges' chains end in the counted
// policy drop.
func TestTaskEgress(t *testing.T) {
	t.Parallel()
	prefix := netip.MustParsePrefix("10.254.42.0/24")
	hosts, port := testhosts.Start(t, prefix, 2)
	if hosts[0] != egressHostA || hosts[1] != egressHostB {
		t.Fatalf("test hosts %v", hosts)
	}
	p, err := docker.New(docker.Config{Network: "dn-tasks-egress-test", Egress: docker.EgressConfig{AllowPrivate: []netip.Prefix{prefix}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.EgressReady(); err != nil {
		t.Fatal(err)
	}
	var bridges []string
	t.Cleanup(func() { // after the environments are gone
		fw := egress.New(egress.Config{}, nil)
		for _, b := range bridges {
			_ = fw.DetachNetwork(context.Background(), b)
		}
	})
	h := newHarness(t, func(c *tasks.Config) { c.Groups = dockerGroups(docker.GroupConfig{FilterNetwork: p.FilterNetwork}) })

	decl, declTok := h.create("acme", "ws", map[string]any{"task_ref": "egress-declared"})
	vault, vaultTok := h.create("acme", "ws", map[string]any{"task_ref": "dreadnode/ssrf-vault@1.0.0", "inputs": map[string]string{"flag": "FLAG{contained}"}})
	web, webTok := h.create("acme", "ws", map[string]any{"task_ref": "dreadnode/web-login@1.0.0", "inputs": map[string]string{"flag": "FLAG{login}"}})
	h.waitState("acme", "ws", decl, readyTimeout, "ready")
	h.waitState("acme", "ws", vault, readyTimeout, "ready")
	h.waitState("acme", "ws", web, readyTimeout, "ready")

	// web-login's instruction still works inside its environment.
	ex := h.execute("acme", "ws", web, webTok, map[string]any{"timeout_sec": 30,
		"command": []string{"wget", "-qO-", "--post-data", "username=admin%27+--+&password=x", "http://web:8080/login"}})
	if ex.Code != 200 || !strings.Contains(ex.JSON(t)["output"].(string), "FLAG{login}") {
		t.Fatalf("web-login's attacker no longer logs in: %d %s", ex.Code, ex.Body)
	}
	if h.connects(web, webTok, egressHostA, port) {
		t.Errorf("web-login's attacker reached %s outside its environment", egressHostA)
	}
	wgw, wport, bridge := h.hostListener(web)
	bridges = append(bridges, bridge)
	if h.connects(web, webTok, wgw, wport) {
		t.Errorf("web-login's attacker reached the host's address %s:%d", wgw, wport)
	}

	if v := h.do("acme", http.MethodGet, "/api/v1/org/acme/tasks/egress-declared", nil).JSON(t); fmt.Sprint(v["network"]) != "map[allowOut:[10.254.42.2/32]]" {
		t.Errorf("the task's view shows network %v", v["network"])
	}

	if !h.connects(decl, declTok, egressHostA, port) {
		t.Errorf("a task declaring %s in network.allowOut does not reach it", egressHostA)
	}
	if h.connects(decl, declTok, egressHostB, port) {
		t.Errorf("a task reached %s, which it did not declare", egressHostB)
	}
	gw, hostPort, bridge := h.hostListener(decl)
	bridges = append(bridges, bridge)
	if h.connects(decl, declTok, gw, hostPort) {
		t.Errorf("a task service reached the host's address %s:%d", gw, hostPort)
	}
	chain, err := osexec.Command("nft", "list", "chain", "inet", egress.Table, "n-"+bridge).CombinedOutput()
	if err != nil || !strings.Contains(string(chain), "ip daddr 10.254.42.2 accept") || !strings.Contains(string(chain), `counter name "dropped_policy" drop`) {
		t.Errorf("the environment's chain does not allow A then drop the rest: %v\n%s", err, chain)
	}

	// ssrf-vault: the instruction's path works, nothing outside does.
	ex = h.execute("acme", "ws", vault, vaultTok, map[string]any{"command": "wget -qO- http://vault:9000/secret", "timeout_sec": 30})
	if ex.Code != 200 || !strings.Contains(ex.JSON(t)["output"].(string), "FLAG{contained}") {
		t.Fatalf("the gateway no longer reaches its vault: %d %s", ex.Code, ex.Body)
	}
	for _, ip := range []string{egressHostA, egressHostB} {
		if h.connects(vault, vaultTok, ip, port) {
			t.Errorf("ssrf-vault's gateway reached %s outside its environment", ip)
		}
	}
	gw, hostPort, bridge = h.hostListener(vault)
	bridges = append(bridges, bridge)
	if h.connects(vault, vaultTok, gw, hostPort) {
		t.Errorf("ssrf-vault's gateway reached the host's address %s:%d", gw, hostPort)
	}
}
