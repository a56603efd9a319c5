package scaleout_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

const backendImage = "dreadnode/backend:latest"

// TestComposeDeploymentStarts runs the topology of examples/deploy with
// plain Docker API calls (docker compose is not needed): it builds the
// postgres image from its Dockerfile, starts it and the three replicas with
// the environment, mounts and networks the Compose file gives them (on
// free ports: tests run side by side), and checks that every replica is
// ready and serves the shared key, and that a replica's traffic router
// reaches a sandbox, which publishes no port on the host.
func TestComposeDeploymentStarts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	images.EnsureBase(t)
	cli := dockertest.Client(t)
	ensureBackendImage(t, cli)
	key := ids.Token("dn_test")
	env := map[string]string{"DREADNODE_BOOTSTRAP_API_KEY": key, "POSTGRES_PASSWORD": "pw-" + ids.New(), "POSTGRES_PORT": freePort(t)}
	for i := 1; i <= 3; i++ {
		env[fmt.Sprintf("DREADNODE_REPLICA_%d_PORT", i)] = freePort(t)
	}
	p, err := loadDeployment(t, env)
	if err != nil {
		t.Fatal(err)
	}
	run := "dn-deploy-" + strings.ToLower(ids.New())
	label := map[string]string{"dev.dreadnode.test": run}
	t.Cleanup(func() { removeRun(t, cli, run) })

	pg := p.Services["postgres"]
	buildContext(t, cli, pg.Build.Context, pg.Image)
	dockertest.CreateNetwork(t, cli, run, network.CreateOptions{Labels: label})
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: run + "-pgdata", Labels: label}); err != nil {
		t.Fatal(err)
	}

	names := p.ServiceNames()
	sort.Strings(names) // postgres first, then replica-1..3
	urls := map[string]string{}
	for _, name := range names {
		s := p.Services[name]
		cfg := &container.Config{Image: s.Image, Labels: label, ExposedPorts: nat.PortSet{}}
		if hc := s.HealthCheck; hc != nil {
			cfg.Healthcheck = &container.HealthConfig{Test: hc.Test}
			if hc.Interval != nil {
				cfg.Healthcheck.Interval = time.Duration(*hc.Interval)
			}
			if hc.Timeout != nil {
				cfg.Healthcheck.Timeout = time.Duration(*hc.Timeout)
			}
			if hc.Retries != nil {
				cfg.Healthcheck.Retries = int(*hc.Retries)
			}
		}
		// As compose does: a service starts once those it depends on are healthy.
		for dep, d := range s.DependsOn {
			if d.Condition == types.ServiceConditionHealthy {
				waitHealthy(t, cli, run+"-"+dep)
			}
		}
		for k, v := range s.Environment {
			if v != nil {
				cfg.Env = append(cfg.Env, k+"="+*v)
			}
		}
		hc := &container.HostConfig{PortBindings: nat.PortMap{}}
		for _, v := range s.Volumes {
			src := v.Source
			if v.Type == "volume" {
				src = run + "-" + v.Source
			}
			bind := src + ":" + v.Target
			if v.ReadOnly {
				bind += ":ro"
			}
			hc.Binds = append(hc.Binds, bind)
		}
		for _, port := range s.Ports {
			cp := nat.Port(fmt.Sprintf("%d/tcp", port.Target))
			cfg.ExposedPorts[cp] = struct{}{}
			hc.PortBindings[cp] = []nat.PortBinding{{HostIP: port.HostIP, HostPort: port.Published}}
		}
		nc := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{run: {Aliases: []string{name}}}}
		if s.NetworkMode == "host" {
			hc.NetworkMode, nc = "host", nil
			hc.ExtraHosts = s.ExtraHosts.AsList(":")
			if listen := s.Environment["DREADNODE_LISTEN"]; listen != nil {
				urls[name] = "http://" + *listen
			}
		}
		c, err := cli.ContainerCreate(ctx, cfg, hc, nc, nil, run+"-"+name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(s.Ports) > 0 && s.Image == backendImage {
			info, err := cli.ContainerInspect(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range info.NetworkSettings.Ports {
				if len(b) > 0 {
					urls[name] = "http://127.0.0.1:" + b[0].HostPort
				}
			}
		}
	}
	if len(urls) != 3 {
		t.Fatalf("want 3 published replicas, got %v", urls)
	}
	for name, url := range urls {
		waitReady(t, cli, run+"-"+name, url, key)
	}
	routerReachesSandbox(t, cli, urls["replica-1"], urls["replica-2"], key)
}

// routerReachesSandbox creates a sandbox serving port 8080 through one
// replica and fetches it through another's traffic router, then deletes it.
func routerReachesSandbox(t *testing.T, cli *client.Client, create, route, key string) {
	t.Helper()
	code, body := httpCall(t, http.MethodPost, create+"/sandboxes", key, "",
		`{"waitReady": true, "timeout": 300, "command": ["python3", "-m", "http.server", "8080"]}`)
	if code != http.StatusCreated {
		t.Fatalf("create through %s: %d %s", create, code, body)
	}
	var sb struct{ SandboxID, AccessToken string }
	if err := json.Unmarshal(body, &sb); err != nil {
		t.Fatal(err)
	}
	name := "dn-" + sb.SandboxID
	info, err := cli.ContainerInspect(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the replicas die without closing: remove what they leave
		_ = cli.ContainerRemove(context.Background(), name, container.RemoveOptions{Force: true, RemoveVolumes: true})
		for net := range info.NetworkSettings.Networks {
			_ = cli.NetworkRemove(context.Background(), net)
		}
	})
	if len(info.HostConfig.PortBindings) != 0 {
		t.Errorf("the sandbox publishes ports on the host: %v", info.HostConfig.PortBindings)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		code, body = httpCall(t, http.MethodGet, route+"/sandboxes/"+sb.SandboxID+"/proxy/8080/", "", sb.AccessToken, "")
		if code == http.StatusOK {
			break
		}
		if code != http.StatusBadGateway || time.Now().After(deadline) {
			t.Fatalf("the router of %s does not reach the sandbox: %d %s", route, code, body)
		}
		time.Sleep(200 * time.Millisecond) // the server is still starting; bounded by the deadline
	}
	if code, body = httpCall(t, http.MethodDelete, route+"/sandboxes/"+sb.SandboxID, key, "", ""); code/100 != 2 {
		t.Fatalf("delete: %d %s", code, body)
	}
}

func httpCall(t *testing.T, method, url, key, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	c := http.Client{Timeout: 2 * time.Minute}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, data
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// waitHealthy polls a container's health check until it passes.
func waitHealthy(t *testing.T, cli *client.Client, ctr string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		info, err := cli.ContainerInspect(context.Background(), ctr)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Health != nil && info.State.Health.Status == "healthy" {
			return
		}
		if !info.State.Running || time.Now().After(deadline) {
			t.Fatalf("%s did not become healthy (running %v):\n%s", ctr, info.State.Running, containerLogs(cli, ctr))
		}
		time.Sleep(200 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// waitReady polls a replica until /readyz answers 200 and an authenticated
// list answers 200 (the shared key works on it).
func waitReady(t *testing.T, cli *client.Client, ctr, url, key string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ready := status(url+"/readyz", "") == http.StatusOK
		if ready && status(url+"/sandboxes", key) == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s at %s is not ready within 3 minutes:\n%s", ctr, url, containerLogs(cli, ctr))
		}
		time.Sleep(200 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func status(url, key string) int {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func containerLogs(cli *client.Client, ctr string) string {
	rc, err := cli.ContainerLogs(context.Background(), ctr, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "40"})
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// ensureBackendImage builds dreadnode/backend:latest with the script `make
// image-backend` runs when the engine does not have it.
func ensureBackendImage(t *testing.T, cli *client.Client) {
	t.Helper()
	if _, err := cli.ImageInspect(context.Background(), backendImage); err == nil {
		return
	}
	root, err := images.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "images", "backend", "build.sh"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", backendImage, err, out)
	}
}

// buildContext builds dir (its Dockerfile) as tag, as compose's build would.
func buildContext(t *testing.T, cli *client.Client, dir, tag string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = rel
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	// apt-get inside the build: on a loaded machine with no layer cache it
	// has taken over 5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("building %s: %v", tag, err)
	}
	defer res.Body.Close()
	var log strings.Builder
	dec := json.NewDecoder(res.Body)
	for {
		var m struct{ Stream, Error string }
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("building %s: %v", tag, err)
		}
		log.WriteString(m.Stream)
		if m.Error != "" {
			t.Fatalf("building %s from %s: %s\n%s", tag, dir, m.Error, log.String())
		}
	}
}

// removeRun removes the run's containers, then its volume and network.
func removeRun(t *testing.T, cli *client.Client, run string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "dev.dreadnode.test="+run))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("removing %s: %v", c.Names, err)
		}
	}
	_ = cli.VolumeRemove(ctx, run+"-pgdata", true)
	_ = cli.NetworkRemove(ctx, run)
}
