// Command bench measures the backend against raw Docker on the same engine,
// image and container options, in one run, and prints the ratios the issues
// name as targets (make bench):
//
//   - create→running p50/p95: POST /sandboxes?waitReady vs ContainerCreate+Start
//   - 50 concurrent creates vs 50 concurrent raw create+start (wall time)
//   - warm-pool create→running p50 (DREADNODE_WARM_POOL_SIZE)
//   - GET /sandboxes/{id} throughput and p99 under concurrent keep-alive clients
//     (get-pg: on a PostgreSQL replica, against SQLite in the same run)
//   - exec, streaming and file transfer (streams.go, files.go); the
//     streamed exec's first byte, watch event latency and the agent's
//     idle RSS (agentparts.go)
//   - deadlines during a burst of creates, lists over 100k records, sandbox
//     metrics latency (fanout.go)
//   - TTL enforcement lag with 10k live records, SQLite and PostgreSQL (ttl.go)
//   - admission: a burst of creates through the queue vs as many concurrent
//     raw docker runs, and the admission decision's cost per create
//   - rate limits: another key's p99 beside a key at 10× its limit
//     (ratelimit.go)
//   - events: what the outbox adds to a transition, and the lag of webhook
//     deliveries at 1,000 transitions per second (events.go)
//   - replicas: creates through 3 backend processes vs 1 on one PostgreSQL
//     database, and the take-over time after one is killed (replicas.go)
//   - egress: create→running p50 of a sandbox with allowOut/denyOut at 10
//     and at 1,000 live ones, against one without and raw Docker, and the
//     rules' install alone beside 10 and 1,000 (egress.go)
//   - dns: the DNS forwarder's answer to an allowed name, p50/p99 alone
//     and beside another sandbox flooding it (dns.go)
//   - churn: sandboxes of mixed kinds (plain, denyOut, autoPause, a task
//     environment's service) created and deleted by a few workers so that
//     the bridge's addresses are reused, an agent call in each as soon as
//     it is ready: the calls that failed (goal 0) and the first call's
//     p50/p99 against a raw container's first docker exec (churn.go)
//   - fork: the checkpoint's time and image size by writable layer, one fork
//     and a fork of 10 → running against cold creates, a task environment
//     fork of 10 → ready against fresh creates of the task (fork.go)
//   - template: a 3-step template build, cold and cached, against docker
//     build of the equivalent Dockerfile (template.go)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

var (
	samples     = flag.Int("n", 20, "sequential creates per side")
	gcPercent   = flag.Int("gogc", 100, "the GC percent of the backend under test (dreadnode-backend serve runs at Go's default, 100, unless GOGC is set)")
	concurrent  = flag.Int("c", 50, "concurrent creates per side")
	getDuration = flag.Duration("get-duration", 5*time.Second, "duration of the GET throughput run")
	getClients  = flag.Int("get-clients", 16, "concurrent GET clients")
	poolSize    = flag.Int("pool", 4, "warm pool size for the warm measurement")
	baseImage   = flag.String("image", images.Base, "the base template's image, of both sides (another tag: a candidate recipe, built beforehand)")
	parts       = flag.String("parts", "cold,concurrent,warm,get,get-pg,exec,stream,first-byte,watch,files,agent-rss,expiry,ttl,list,metrics,admission,ratelimit,events,egress,dns,churn,template,replicas,takeover,fork", "comma-separated parts to run")
	admBurst    = flag.Int("admission-burst", 100, "creates in the admission burst (per side)")
	burstRoom   = flag.Int("burst-capacity", 16, "DREADNODE_CAPACITY_SANDBOXES of the admission burst's backend")
)

func want(part string) bool { return slices.Contains(strings.Split(*parts, ","), part) }

func main() {
	flag.Parse()
	ctx := context.Background()
	if *baseImage == images.Base {
		if err := images.EnsureBaseImage(ctx); err != nil {
			fail(err)
		}
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		fail(err)
	}
	img, err := cli.ImageInspect(ctx, *baseImage)
	if err != nil {
		fail(fmt.Errorf("the base image %s: %w (images/base/build.sh builds it; DREADNODE_BASE_IMAGE names another tag)", *baseImage, err))
	}
	engine = cli
	onSignals()
	atExit(func() { removeRaw(ctx, cli) })
	defer runExits()
	debug.SetGCPercent(*gcPercent)
	cold := start(ctx, 0)
	defer cold.close()

	fmt.Printf("dreadnode backend vs raw Docker (same engine, image %s of %.0f MB, same container options)\n\n", *baseImage, float64(img.Size)/1e6)
	var ours, raw []time.Duration
	for i := range *samples * boolInt(want("cold")) { // interleaved so drift hits both sides alike
		ours = append(ours, cold.createRunning())
		raw = append(raw, rawCreateStart(ctx, cli, fmt.Sprintf("bench-raw-%d-%s", i, ids.New())))
		cold.cleanup()
	}
	if want("cold") {
		report("create→running (cold)", ours, raw, 1.10)
	}
	if want("concurrent") {
		concurrentCreates(ctx, cli, cold)
	}
	if want("warm") {
		warmCreates(ctx, ours)
	}
	if want("get") {
		cold.getThroughput()
	}
	if want("get-pg") {
		getOnPostgres(ctx, cold)
	}
	streamParts(ctx, cli, cold)
	if want("metrics") {
		cold.metricsLatency()
	}
	if want("expiry") {
		expiryDuringBurst(ctx)
	}
	if want("ttl") {
		ttlLag(ctx)
	}
	if want("list") {
		listsOverHistory(ctx)
	}
	if want("admission") {
		admissionBurst(ctx, cli)
		admissionOverhead(ctx, cold, ours)
	}
	if want("ratelimit") {
		rateLimitIsolation(ctx)
	}
	if want("events") {
		eventsPart(ctx)
	}
	if want("egress") {
		egressPart(ctx)
	}
	if want("dns") {
		dnsPart()
	}
	if want("churn") {
		churnPart(ctx)
	}
	if want("fork") {
		forkPart(ctx)
	}
	if want("template") {
		templatePart(ctx)
	}
	replicaParts()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func concurrentCreates(ctx context.Context, cli *client.Client, cold *backend) {
	oursAll := timed(func() { parallel(*concurrent, func(int) { cold.createRunning() }) })
	cold.cleanup()
	rawAll := timed(func() {
		parallel(*concurrent, func(i int) { rawCreateStart(ctx, cli, fmt.Sprintf("bench-rawc-%d-%s", i, ids.New())) })
	})
	fmt.Printf("%-28s ours %8.1f ms   raw %8.1f ms   ratio %.2f× (target ≤ 1.15×)\n", fmt.Sprintf("%d concurrent creates", *concurrent),
		ms(oursAll), ms(rawAll), float64(oursAll)/float64(rawAll))
}

func warmCreates(ctx context.Context, ours []time.Duration) {
	warm := start(ctx, *poolSize)
	var warmRuns []time.Duration
	for range *samples {
		warm.waitPool()
		warmRuns = append(warmRuns, warm.createRunning())
	}
	warm.cleanup()
	warm.close()
	fmt.Printf("%-28s p50 %8.1f ms   p95 %8.1f ms   (target p50 < 20 ms; cold p50 %.1f ms)\n", "create→running (warm pool)",
		ms(pct(warmRuns, 50)), ms(pct(warmRuns, 95)), ms(pct(ours, 50)))
}

// engine is the Docker client of the bench's own (raw) side and of its
// removals.
var engine *client.Client

// backend is an in-process backend on a temp database, served over loopback.
type backend struct {
	app    *app.App
	srv    *httptest.Server
	key    string
	mu     sync.Mutex
	ids    []string
	client *http.Client
	close  func() // stops the backend and removes all it made; also run by fail
}

func start(ctx context.Context, pool int, mutate ...func(*app.Config)) *backend {
	dir, err := os.MkdirTemp("", "dreadnode-bench")
	if err != nil {
		fail(err)
	}
	key := ids.Token("bench")
	// Admission is measured by its own part (admission.go), which sets the
	// room it needs; every other part gets room for all it creates, so the
	// engine's default capacity (its CPUs × 32) never queues a burst.
	cfg := app.Config{Listen: "127.0.0.1:0", DataDir: dir, DatabaseURL: filepath.Join(dir, "db"), TasksDir: filepath.Join(dir, "tasks"),
		Provider: "docker", BootstrapOrg: "bench", BootstrapKey: key, BootstrapCredits: 1e9, MinTimeoutSec: 60,
		ReconcileInterval: time.Second, WarmPoolSize: pool, Capacity: roomy, DockerNetwork: benchNetwork, DockerImage: *baseImage}
	if cfg.AgentBinary, err = agentbin.Build(); err != nil {
		os.RemoveAll(dir)
		fail(err)
	}
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		os.RemoveAll(dir)
		fail(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	for _, loop := range a.Loops() {
		go func() { _ = loop(lctx) }()
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}
	b := &backend{app: a, srv: httptest.NewServer(a.Handler), key: key, client: &http.Client{Transport: tr}}
	deployment, err := a.DB.DeploymentID(ctx)
	b.close = atExit(func() {
		b.srv.Close()
		cancel()
		a.Close()
		if err == nil { // what its reconciler did not remove yet
			removeDeployment(engine, deployment)
		}
		os.RemoveAll(dir)
	})
	if err != nil {
		fail(fmt.Errorf("reading the bench backend's deployment id: %w", err))
	}
	return b
}

// roomy is the capacity of a bench backend: more than any part creates.
var roomy = admission.Capacity{Sandboxes: 100_000, CPU: 100_000, MemoryMB: 100_000 << 10}

func (b *backend) do(method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, b.srv.URL+path, rd)
	req.Header.Set("X-API-Key", b.key)
	res, err := b.client.Do(req)
	if err != nil {
		fail(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, data
}

// createRunning times POST /sandboxes with waitReady until it answers running.
func (b *backend) createRunning() time.Duration {
	t0 := time.Now()
	code, body := b.do("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 600})
	d := time.Since(t0)
	var sb struct{ SandboxID, State string }
	_ = json.Unmarshal(body, &sb)
	if code != http.StatusCreated || sb.State != string(sbx.StateRunning) {
		fail(fmt.Errorf("create: %d %s", code, body))
	}
	b.mu.Lock()
	b.ids = append(b.ids, sb.SandboxID)
	b.mu.Unlock()
	return d
}

func (b *backend) cleanup() {
	b.mu.Lock()
	ids := b.ids
	b.ids = nil
	b.mu.Unlock()
	parallel(len(ids), func(i int) { b.do("DELETE", "/sandboxes/"+ids[i], nil) })
}

// waitPool polls until the warm pool is full again, so each warm sample
// measures a claim rather than a refill.
func (b *backend) waitPool() {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b.app.WarmPoolReady() >= *poolSize {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	fail(fmt.Errorf("the warm pool did not fill within 60s"))
}

// getThroughput loads GET /sandboxes/{id} with wrk when it is installed (a
// C load generator in its own process, as a client would be), else with Go
// clients in this process (which then compete with the server for the CPU).
func (b *backend) getThroughput() {
	b.createRunning()
	url := b.srv.URL + "/sandboxes/" + b.ids[0]
	if path, err := exec.LookPath("wrk"); err == nil {
		b.getWithWrk(path, url)
	} else {
		b.getInProcess(url)
	}
	b.cleanup()
}

var (
	wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkP50  = regexp.MustCompile(`\s50%\s+([0-9.]+)(us|ms|s)`)
	wrkP99  = regexp.MustCompile(`\s99%\s+([0-9.]+)(us|ms|s)`)
)

func (b *backend) getWithWrk(wrk, url string) {
	rate, p50, p99 := b.wrk(wrk, url)
	fmt.Printf("%-28s %8s req/s   p50 %s%s   p99 %s%s   (wrk, 1 thread, %d connections; target ≥ 20000 req/s, p99 ≤ 5 ms)\n",
		"GET /sandboxes/{id}", rate[1], p50[1], p50[2], p99[1], p99[2], *getClients)
}

// wrk loads url for getDuration with getClients connections and returns
// the rate and the p50 and p99 latencies as wrk prints them (value, unit).
func (b *backend) wrk(wrk, url string) (rate, p50, p99 [][]byte) {
	out, err := exec.CommandContext(context.Background(), wrk, "-t1", fmt.Sprintf("-c%d", *getClients), "-d"+getDuration.String(), "--latency",
		"-H", "X-API-Key: "+b.key, url).CombinedOutput()
	if err != nil {
		fail(fmt.Errorf("wrk: %v\n%s", err, out))
	}
	rate, p50, p99 = wrkRate.FindSubmatch(out), wrkP50.FindSubmatch(out), wrkP99.FindSubmatch(out)
	if rate == nil || p50 == nil || p99 == nil {
		fail(fmt.Errorf("unexpected wrk output:\n%s", out))
	}
	if bytes.Contains(out, []byte("Non-2xx")) {
		fail(fmt.Errorf("wrk saw errors on %s:\n%s", url, out))
	}
	return rate, p50, p99
}

func (b *backend) getInProcess(url string) {
	var n atomic.Int64
	lat := make([][]time.Duration, *getClients)
	stop := time.Now().Add(*getDuration)
	parallel(*getClients, func(i int) {
		for time.Now().Before(stop) {
			t0 := time.Now()
			req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
			req.Header.Set("X-API-Key", b.key)
			res, err := b.client.Do(req)
			if err != nil {
				fail(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			lat[i] = append(lat[i], time.Since(t0))
			if res.StatusCode != 200 {
				fail(fmt.Errorf("GET %s: %d", url, res.StatusCode))
			}
			n.Add(1)
		}
	})
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	rate := float64(n.Load()) / getDuration.Seconds()
	fmt.Printf("%-28s %8.0f req/s   p50 %.2f ms   p99 %.2f ms   (%d Go clients in this process: install wrk for a fair figure; target ≥ 20000 req/s, p99 ≤ 5 ms)\n",
		"GET /sandboxes/{id}", rate, ms(pct(all, 50)), ms(pct(all, 99)), *getClients)
}

// rawCreateStart creates and starts the container the provider would:
// same image, network, port binding and resource limits.
func rawCreateStart(ctx context.Context, cli *client.Client, name string) time.Duration {
	cfg, hc := rawConfig()
	t0 := time.Now()
	c, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		fail(err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		fail(err)
	}
	return time.Since(t0)
}

// benchNetwork is the sandbox network of every backend the bench starts, so
// that the raw containers join the same (inter-container traffic off) bridge.
const benchNetwork = "dreadnode-bench"

// rawConfig is the container the provider would make: same image, network,
// (no) port binding and resource limits.
func rawConfig() (*container.Config, *container.HostConfig) {
	cfg := &container.Config{Image: *baseImage, Labels: map[string]string{"dev.dreadnode.bench": "raw"}}
	pids := int64(4096)
	return cfg, &container.HostConfig{
		NetworkMode: benchNetwork,
		Resources:   container.Resources{NanoCPUs: 1e9, Memory: 512 << 20, MemorySwap: 512 << 20, PidsLimit: &pids},
	}
}

func removeRaw(ctx context.Context, cli *client.Client) {
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true})
	for _, c := range cs {
		if c.Labels["dev.dreadnode.bench"] == "raw" {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	}
}

func report(name string, ours, raw []time.Duration, target float64) {
	for _, p := range []int{50, 95} {
		o, r := pct(ours, p), pct(raw, p)
		fmt.Printf("%-28s p%d ours %8.1f ms   raw %8.1f ms   ratio %.2f× (target ≤ %.2f×)\n", name, p, ms(o), ms(r), float64(o)/float64(r), target)
	}
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fail reports err, removes everything the bench made and exits.
func fail(err error) {
	exits.Lock()
	ending := exits.started
	exits.Unlock()
	if !ending { // not an echo of the removals already under way (a closed server)
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	runExits()
	os.Exit(1)
}
