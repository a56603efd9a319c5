package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// TestE2BFlowOnE2BFake drives the same E2B flow through the backend on the
// E2B provider: /e2b and the host router in front, the E2B fake as E2B's
// control plane and proxy, and as each fake sandbox's envd a real one (our
// agent in a busybox container, as E2B runs envd in its VM), so the flow's
// processes and files are real. The fake checks the envd routes' answers
// against envd.yaml.
func TestE2BFlowOnE2BFake(t *testing.T) {
	t.Parallel()
	ensureFlowImages(t)
	envds := &fakeEnvds{t: t, bin: agentbin.Path(t), byID: map[string]*fakeEnvd{}}
	fake := e2bfake.New(t, e2bfake.WithEnvd(envds.upstream))
	ta := newTestApp(t, func(c *Config) {
		c.Provider = "e2b"
		c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
	})
	e2bFlow(t, ta, shellImage("base", "/bin/busybox stty"))
	if n := len(envds.byID); n != 1 {
		t.Fatalf("the flow reached %d envds, want the one of its sandbox", n)
	}
	// Through E2B's proxy (the fake), not around it.
	for _, route := range []string{e2bfake.RouteProcessStart, e2bfake.RouteFilesGet, e2bfake.RouteFilesPost, "envd POST /process.Process/StreamInput", "envd POST /process.Process/Update"} {
		if fake.Count(route) == 0 {
			t.Errorf("no %s reached the fake", route)
		}
	}
}

// fakeEnvds starts, on a fake sandbox's first envd request, a container
// running the agent as its envd.
type fakeEnvds struct {
	t    *testing.T
	bin  string
	mu   sync.Mutex
	byID map[string]*fakeEnvd
}

type fakeEnvd struct {
	once        sync.Once
	base, token string
	err         error
}

func (f *fakeEnvds) upstream(id string) (string, string, error) {
	f.mu.Lock()
	e, ok := f.byID[id]
	if !ok {
		e = &fakeEnvd{}
		f.byID[id] = e
	}
	f.mu.Unlock()
	e.once.Do(func() { e.base, e.token, e.err = f.start(id) })
	return e.base, e.token, e.err
}

func (f *fakeEnvds) start(id string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	cli := dockertest.Client(f.t)
	c, err := cli.ContainerCreate(ctx, &container.Config{
		Image:      flowBusybox,
		Entrypoint: []string{"/dn-agent", "--", "/bin/sleep", "infinity"},
		Env:        []string{agent.EnvToken + "=" + token},
		Labels:     map[string]string{"dev.dreadnode.test": "e2bflow-fake", "dev.dreadnode.test.sandbox": id},
	}, &container.HostConfig{Binds: []string{f.bin + ":/dn-agent:ro"}, Init: new(bool)}, nil, nil, "")
	if err != nil {
		return "", "", fmt.Errorf("creating the envd container of %s: %w", id, err)
	}
	f.t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return "", "", fmt.Errorf("starting the envd container of %s: %w", id, err)
	}
	in, err := cli.ContainerInspect(ctx, c.ID)
	if err != nil {
		return "", "", err
	}
	ip := ""
	for _, n := range in.NetworkSettings.Networks {
		if ip == "" {
			ip = n.IPAddress
		}
	}
	if ip == "" {
		return "", "", fmt.Errorf("the envd container of %s has no IP address", id)
	}
	return fmt.Sprintf("http://%s:%d", ip, agent.Port), token, nil
}
