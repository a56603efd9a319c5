package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	osexecpkg "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
)

// agentURL is the agent's address in a sandbox: the container's IP on its
// network, port 49983 (the host reaches bridge addresses directly), and
// the token the provider gave it (derived from its label).
func agentURL(t *testing.T, p *Provider, inst compute.Instance) (string, string) {
	t.Helper()
	c, err := p.cli.ContainerInspect(context.Background(), inst.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.NetworkSettings.Networks {
		if n.IPAddress != "" {
			return "http://" + n.IPAddress + ":" + strconv.Itoa(agent.Port), p.agentKey.tokenOf(c)
		}
	}
	t.Fatalf("container %s has no IP address", inst.Ref.ID)
	return "", ""
}

// waitHealthy polls the agent's /health until it answers 204.
func waitHealthy(t *testing.T, url string) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	eventually(t, 20*time.Second, func() error {
		res, err := hc.Get(url + "/health")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			return fmt.Errorf("/health answered %d", res.StatusCode)
		}
		return nil
	})
}

func listProcesses(url, token string) error {
	c := processconnect.NewProcessClient(http.DefaultClient, url)
	req := connect.NewRequest(&process.ListRequest{})
	req.Header().Set(agent.TokenHeader, token)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.List(ctx, req)
	return err
}

func TestAgentServesInBaseImage(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{AgentBinary: agentbin.Path(t)})
	spec := testSpec()
	spec.Command = []string{"sh", "-c", "echo main says hello; exec sleep infinity"}
	inst := mustCreate(t, p, spec)
	url, token := agentURL(t, p, inst)
	if len(token) < 32 {
		t.Fatalf("agent token %q is too short", token)
	}
	waitHealthy(t, url)
	if err := listProcesses(url, token); err != nil {
		t.Fatalf("List with the labelled token: %v", err)
	}
	if err := listProcesses(url, "wrong"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("List with a wrong token: %v", err)
	}
	// The main command's output still reaches the engine's logs.
	eventually(t, 10*time.Second, func() error {
		logs, err := p.Logs(context.Background(), inst.Ref)
		if err != nil || !strings.Contains(logs, "main says hello") {
			return fmt.Errorf("logs %q, %v", logs, err)
		}
		return nil
	})
	// The token is not in the environment the main process got.
	res := exec(t, p, inst, "sh", "-c", "cat /proc/1/cmdline | tr '\\0' ' '; echo; ps -o pid,args 2>/dev/null | head -5; env")
	if strings.Contains(string(res.Stdout), token) {
		t.Fatalf("the token leaks into the sandbox's argv or environment:\n%s", res.Stdout)
	}
}

// TestAgentReapsOrphans: 30 orphans of an exec are reparented to PID 1,
// the agent, which reaps them; without the agent (PID 1 is sleep) they
// stay zombies.
func TestAgentReapsOrphans(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{AgentBinary: agentbin.Path(t)})
	inst := mustCreate(t, p, testSpec())
	exec(t, p, inst, "sh", "-c", `for i in $(seq 30); do (sleep 0.05 &); done`)
	eventually(t, 10*time.Second, func() error {
		res := exec(t, p, inst, "sh", "-c", `for s in /proc/[0-9]*/stat; do cut -d' ' -f3 "$s"; done 2>/dev/null | grep -c Z || true`)
		if n := strings.TrimSpace(string(res.Stdout)); n != "0" {
			return fmt.Errorf("%s zombies in the sandbox", n)
		}
		return nil
	})
}

// noShellImage is a FROM-scratch image holding one static program, /app:
// it sleeps, or exits with the code given as its argument.
func noShellImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	ref := testImagePrefix + "noshell:latest"
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref
	}
	dir := t.TempDir()
	src := `package main

import (
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		code, _ := strconv.Atoi(os.Args[1])
		os.Exit(code)
	}
	for {
		time.Sleep(time.Hour)
	}
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	build := goCommand(dir, "go", "build", "-o", "app", "main.go")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the no-shell program: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "app"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "app", Mode: 0o755, Size: int64(len(bin))})
	_, _ = tw.Write(bin)
	_ = tw.Close()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: []string{`CMD ["/app"]`}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	return ref
}

func goCommand(dir string, name string, args ...string) *osexecpkg.Cmd {
	c := osexecpkg.Command(name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
	return c
}

// TestAgentInImageWithoutShell: the agent needs nothing from the image, and
// the main command's exit still ends the sandbox with its exit code.
func TestAgentInImageWithoutShell(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{AgentBinary: agentbin.Path(t)})
	p.RegisterTemplate(compute.Template{ID: "noshell", CPUCount: 1, MemoryMB: 128}, noShellImage(t, p.cli))
	spec := testSpec()
	spec.Template = "noshell"
	inst := mustCreate(t, p, spec)
	url, token := agentURL(t, p, inst)
	waitHealthy(t, url)
	if err := listProcesses(url, token); err != nil {
		t.Fatalf("List: %v", err)
	}

	spec = testSpec()
	spec.Template = "noshell"
	spec.Command = []string{"/app", "7"}
	inst = mustCreate(t, p, spec)
	eventually(t, 20*time.Second, func() error {
		got, err := p.Get(context.Background(), inst.Ref)
		if err != nil {
			return err
		}
		if got.Status != compute.StatusExited || got.ExitCode != 7 {
			return fmt.Errorf("status %s, exit code %d; want exited with 7", got.Status, got.ExitCode)
		}
		return nil
	})
}

// TestAgentKeepsTheImageUser: in an image with a USER, the agent runs as
// root (it reads its root-only token) and the main command as that user.
func TestAgentKeepsTheImageUser(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{AgentBinary: agentbin.Path(t)})
	p.RegisterTemplate(compute.Template{ID: "nobody", CPUCount: 1, MemoryMB: 128},
		derivedImage(t, p, testImagePrefix+"nobody:latest", "true", "USER nobody"))
	spec := testSpec()
	spec.Template = "nobody"
	spec.Command = []string{"sh", "-c", `echo "uid=$(id -u) home=$HOME"; exec sleep infinity`}
	inst := mustCreate(t, p, spec)
	url, token := agentURL(t, p, inst)
	waitHealthy(t, url)
	if err := listProcesses(url, token); err != nil {
		t.Fatalf("List: %v", err)
	}
	eventually(t, 10*time.Second, func() error {
		logs, err := p.Logs(context.Background(), inst.Ref)
		if err != nil || !strings.Contains(logs, "uid=65534 home=/nonexistent") && !strings.Contains(logs, "uid=65534 home=/") {
			return fmt.Errorf("logs %q, %v", logs, err)
		}
		return nil
	})
	// Exec and processes run as the image's USER too, as the engine's exec did.
	if res := exec(t, p, inst, "id", "-u"); strings.TrimSpace(string(res.Stdout)) != "65534" {
		t.Fatalf("exec ran as uid %q, want the image's USER (65534)", res.Stdout)
	}
}

// TestAgentVolume: the agent comes from one labelled volume per binary,
// filled once however many creates race for it (two providers, as two
// replicas would be), and mounted read-only: the sandbox's root cannot
// replace the agent every other sandbox runs.
func TestAgentVolume(t *testing.T) {
	t.Parallel()
	bin := agentbin.Path(t)
	// Two backends of one deployment: one seed for their agents' tokens.
	seed := randomHex(16)
	p1, p2 := newProvider(t, Config{AgentBinary: bin, AgentTokenSeed: seed}), newProvider(t, Config{AgentBinary: bin, AgentTokenSeed: seed})
	var insts [4]compute.Instance
	errs := make(chan error, len(insts))
	for i := range insts {
		go func() {
			p := p1
			if i%2 == 1 {
				p = p2
			}
			spec := testSpec()
			inst, err := p.Create(context.Background(), spec)
			if err == nil {
				t.Cleanup(func() { _ = p.Delete(context.Background(), inst.Ref) })
			}
			insts[i] = inst
			errs <- err
		}()
	}
	for range insts {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent create: %v", err)
		}
	}
	v, err := p1.cli.VolumeInspect(context.Background(), p1.agent.volume)
	if err != nil {
		t.Fatal(err)
	}
	if v.Labels[labelAgentBinary] != p1.agent.sum {
		t.Fatalf("volume %s labels %v, want %s=%s", v.Name, v.Labels, labelAgentBinary, p1.agent.sum)
	}
	for _, inst := range insts {
		url, token := agentURL(t, p1, inst)
		waitHealthy(t, url)
		if err := listProcesses(url, token); err != nil {
			t.Fatalf("List in %s: %v", inst.Ref.ID, err)
		}
	}
	// The running binary itself is busy (ETXTBSY), so plant a file beside it.
	res := exec(t, p1, insts[0], "sh", "-c", "id -u; echo x > "+agentDir+"/planted && echo planted")
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "planted") {
		t.Fatalf("the sandbox wrote into the agent's volume (exit %d): %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.Contains(string(res.Stderr), "Read-only") {
		t.Fatalf("writing into the agent's volume failed, but not for being read-only: %s", res.Stderr)
	}
}

// A filler container left behind once the volume is full (its backend was
// killed before removing it, or its create was cancelled after the engine
// had made it) holds no one up: a new backend sees the volume is ready.
// Without the check on the leftover's volume, ensureAgentVolume waits for
// the filler to go stale (minutes) and this test's deadline ends it.
func TestAgentVolumeLeftoverFiller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A binary of its own (one byte more: same program, another volume),
	// so the leftover made here stands in no other test's way.
	data, err := os.ReadFile(agentbin.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "dn-agent")
	if err := os.WriteFile(bin, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	first := newProvider(t, Config{AgentBinary: bin})
	if err := first.agent.ensureVolume(ctx, DefaultBaseImage); err != nil {
		t.Fatal(err)
	}
	vol := first.agent.volume
	t.Cleanup(func() { _ = first.cli.VolumeRemove(context.Background(), vol, true) })
	leftover, err := first.cli.ContainerCreate(ctx, &container.Config{Image: DefaultBaseImage, Entrypoint: []string{agentPath}},
		&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: "/v"}}},
		nil, nil, vol+"-fill")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.agent.removeFiller(leftover.ID) })

	second := newProvider(t, Config{AgentBinary: bin})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := second.agent.ensureVolume(wctx, DefaultBaseImage); err != nil {
		t.Fatalf("a leftover filler of a full volume held the next backend up: %v", err)
	}
	inst := mustCreate(t, second, testSpec())
	url, token := agentURL(t, second, inst)
	waitHealthy(t, url)
	if err := listProcesses(url, token); err != nil {
		t.Fatal(err)
	}
}
