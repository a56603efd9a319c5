package tasks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// benchTask is the task every benchmark provisions (two services, one with
// a healthcheck, images built from the repo's sources).
const benchTask = "web-login"

// warm provisions benchTask once so its images are cached, and returns the
// container configurations the Service produced, for the raw baseline.
func warm(b *testing.B, h *harness) []container.InspectResponse {
	b.Helper()
	id, _ := h.create("acme", "bench", map[string]any{"task_ref": benchTask})
	h.waitState("acme", "bench", id, readyTimeout, "ready")
	var out []container.InspectResponse
	for _, c := range h.containers(id) {
		in, err := h.cli.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, in)
	}
	h.do("acme", http.MethodDelete, envPath("acme", "bench", "/", id), nil)
	return out
}

// rawUp starts the same containers with plain Docker SDK calls: a network,
// the containers created and started concurrently, then polls until every
// container runs and the ones with a healthcheck are healthy. It returns a
// cleanup function.
func rawUp(b *testing.B, h *harness, tmpl []container.InspectResponse) func() {
	b.Helper()
	ctx := context.Background()
	name := "dn-raw-" + ids.New()
	netID := dockertest.CreateNetwork(b, h.cli, name, network.CreateOptions{Driver: "bridge", Labels: map[string]string{"dev.dreadnode.bench": "raw"}})
	idsCh := make(chan string, len(tmpl))
	var wg sync.WaitGroup
	for _, in := range tmpl {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc := in.Config.Labels["dev.dreadnode.service"]
			cfg := &container.Config{Image: in.Config.Image, Cmd: in.Config.Cmd, Env: in.Config.Env, Hostname: svc,
				Healthcheck: in.Config.Healthcheck, ExposedPorts: in.Config.ExposedPorts, User: in.Config.User,
				WorkingDir: in.Config.WorkingDir, Labels: map[string]string{"dev.dreadnode.bench": "raw"}}
			host := &container.HostConfig{Init: in.HostConfig.Init, PortBindings: nat.PortMap{}}
			for p := range in.Config.ExposedPorts {
				host.PortBindings[p] = []nat.PortBinding{{HostIP: "127.0.0.1"}}
			}
			resp, err := h.cli.ContainerCreate(ctx, cfg, host, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				name: {Aliases: []string{svc}}}}, nil, name+"-"+svc)
			if err != nil {
				b.Error(err)
				return
			}
			idsCh <- resp.ID
			if err := h.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	close(idsCh)
	var cids []string
	for id := range idsCh {
		cids = append(cids, id)
	}
	cleanup := func() {
		for _, id := range cids {
			_ = h.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		}
		_ = h.cli.NetworkRemove(ctx, netID)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ready := true
		for _, id := range cids {
			in, err := h.cli.ContainerInspect(ctx, id)
			if err != nil || !in.State.Running || (in.State.Health != nil && in.State.Health.Status != container.Healthy) {
				ready = false
				break
			}
		}
		if ready {
			return cleanup
		}
		if time.Now().After(deadline) {
			cleanup()
			b.Fatal("raw containers never became ready")
		}
		time.Sleep(25 * time.Millisecond) // the baseline's own readiness poll
	}
}

// BenchmarkReadyCachedVsRaw: POST /environments → ready (build cached,
// observed with ?wait) against starting the same containers with raw Docker
// SDK calls, alternating in the same run (pairsPerOp pairs per iteration, so
// even b.N = 1 averages several). Reports both and their ratio.
func BenchmarkReadyCachedVsRaw(b *testing.B) {
	const pairsPerOp = 5
	h := newHarness(b)
	tmpl := warm(b, h)
	var svcTotal, rawTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N*pairsPerOp; i++ {
		measure := []func(){
			func() {
				start := time.Now()
				cleanup := rawUp(b, h, tmpl)
				rawTotal += time.Since(start)
				b.StopTimer()
				cleanup()
				b.StartTimer()
			},
			func() {
				start := time.Now()
				id, _ := h.create("acme", "bench", map[string]any{"task_ref": benchTask})
				h.waitState("acme", "bench", id, time.Minute, "ready")
				svcTotal += time.Since(start)
				b.StopTimer()
				h.do("acme", http.MethodDelete, envPath("acme", "bench", "/", id), nil)
				b.StartTimer()
			},
		}
		if i%2 == 1 {
			measure[0], measure[1] = measure[1], measure[0]
		}
		for _, m := range measure {
			m()
		}
	}
	b.StopTimer()
	svcMs := float64(svcTotal.Milliseconds()) / float64(b.N*pairsPerOp)
	rawMs := float64(rawTotal.Milliseconds()) / float64(b.N*pairsPerOp)
	b.ReportMetric(svcMs, "service-ms/env")
	b.ReportMetric(rawMs, "raw-ms/env")
	b.ReportMetric(svcMs/rawMs, "ratio")
}

// BenchmarkFanout20: 20 environments of one task created at once; reports
// the time until all are ready and the slowest one.
func BenchmarkFanout20(b *testing.B) {
	const n = 20
	h := newHarness(b)
	warm(b, h)
	var totalSum, slowestSum time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var mu sync.Mutex
		var durations []time.Duration
		var envs []string
		var wg sync.WaitGroup
		for k := 0; k < n; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				id, _ := h.create("acme", "fan", map[string]any{"task_ref": benchTask, "inputs": map[string]string{"flag": fmt.Sprint("F", k)}})
				h.waitState("acme", "fan", id, 5*time.Minute, "ready")
				mu.Lock()
				durations = append(durations, time.Since(t0))
				envs = append(envs, id)
				mu.Unlock()
			}()
		}
		wg.Wait()
		total := time.Since(start)
		b.StopTimer()
		sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
		totalSum += total
		slowestSum += durations[len(durations)-1]
		b.Logf("20 environments: all ready in %s; fastest %s, median %s, slowest %s", total, durations[0], durations[n/2], durations[n-1])
		var dw sync.WaitGroup
		for _, id := range envs {
			dw.Add(1)
			go func() {
				defer dw.Done()
				h.do("acme", http.MethodDelete, envPath("acme", "fan", "/", id), nil)
			}()
		}
		dw.Wait()
		b.StartTimer()
	}
	b.ReportMetric(float64(totalSum.Milliseconds())/float64(b.N), "total-ms")
	b.ReportMetric(float64(slowestSum.Milliseconds())/float64(b.N), "slowest-ms")
}

// BenchmarkFanout20Raw is BenchmarkFanout20's baseline: the same 20
// environments' containers started at once with raw Docker SDK calls.
func BenchmarkFanout20Raw(b *testing.B) {
	const n = 20
	h := newHarness(b)
	tmpl := warm(b, h)
	var totalSum, slowestSum time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var mu sync.Mutex
		var durations []time.Duration
		var cleanups []func()
		var wg sync.WaitGroup
		for k := 0; k < n; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				c := rawUp(b, h, tmpl)
				mu.Lock()
				durations = append(durations, time.Since(t0))
				cleanups = append(cleanups, c)
				mu.Unlock()
			}()
		}
		wg.Wait()
		total := time.Since(start)
		b.StopTimer()
		sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
		totalSum += total
		slowestSum += durations[len(durations)-1]
		b.Logf("20 raw environments: all ready in %s; fastest %s, median %s, slowest %s", total, durations[0], durations[n/2], durations[n-1])
		for _, c := range cleanups {
			c()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(totalSum.Milliseconds())/float64(b.N), "total-ms")
	b.ReportMetric(float64(slowestSum.Milliseconds())/float64(b.N), "slowest-ms")
}

// BenchmarkPolling: status requests a client makes per environment to
// observe ready: one long poll with ?wait, a 100 ms fixed poll, and the
// SDK's exponential backoff (1 s → 5 s) without ?wait. Also reports how late
// each notices ready.
func BenchmarkPolling(b *testing.B) {
	h := newHarness(b)
	warm(b, h)
	modes := []struct {
		name string
		next func(prev time.Duration) time.Duration // 0: use ?wait
	}{
		{"wait", nil},
		{"poll100ms", func(time.Duration) time.Duration { return 100 * time.Millisecond }},
		{"sdkbackoff", func(prev time.Duration) time.Duration {
			if prev == 0 {
				return time.Second
			}
			return min(prev*2, 5*time.Second)
		}},
	}
	reqs := map[string]int{}
	lag := map[string]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, m := range modes {
			id, _ := h.create("acme", "poll", map[string]any{"task_ref": benchTask})
			n := 0
			var readyAt time.Time
			var sleep time.Duration
			for {
				q := ""
				if m.next == nil {
					q = "?wait=60"
				}
				st := h.do("acme", http.MethodGet, envPath("acme", "poll", "/", id, "/status", q), nil).JSON(b)
				n++
				if st["state"] == "ready" {
					readyAt = time.Now()
					break
				}
				if st["state"] == "failed" {
					b.Fatalf("failed: %v", st["error"])
				}
				if m.next != nil {
					sleep = m.next(sleep)
					time.Sleep(sleep) // the polling strategy under measurement
				}
			}
			env := h.get("acme", "poll", id)
			var readyRecorded time.Time
			for _, e := range env["timeline"].([]any) {
				if e.(map[string]any)["state"] == "ready" {
					readyRecorded, _ = time.Parse(time.RFC3339Nano, e.(map[string]any)["at"].(string))
				}
			}
			reqs[m.name] += n
			lag[m.name] += readyAt.Sub(readyRecorded)
			h.do("acme", http.MethodDelete, envPath("acme", "poll", "/", id), nil)
		}
	}
	b.StopTimer()
	for _, m := range modes {
		b.ReportMetric(float64(reqs[m.name])/float64(b.N), "req/env-"+m.name)
		b.ReportMetric(float64(lag[m.name].Milliseconds())/float64(b.N), "lag-ms-"+m.name)
	}
}

// BenchmarkExecuteVsDockerExec: POST /execute of `true` in the task's
// execute service (through the backend and the service's agent) against a
// raw `docker exec true` in the same container, alternating, pairsPerOp
// pairs per iteration. Reports both medians and their ratio.
func BenchmarkExecuteVsDockerExec(b *testing.B) {
	const pairsPerOp = 20
	h := newHarness(b)
	warm(b, h)
	id, token := h.create("acme", "bench", map[string]any{"task_ref": benchTask})
	defer h.do("acme", http.MethodDelete, envPath("acme", "bench", "/", id), nil)
	h.waitState("acme", "bench", id, readyTimeout, "ready")
	var cid string
	for _, c := range h.containers(id) {
		if c.Labels["dev.dreadnode.service"] == "attacker" {
			cid = c.ID
		}
	}
	if cid == "" {
		b.Fatal("no container of the execute service")
	}
	ctx := context.Background()
	raw := func() {
		c, err := h.cli.ContainerExecCreate(ctx, cid, container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			b.Fatal(err)
		}
		att, err := h.cli.ContainerExecAttach(ctx, c.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, att.Reader)
		att.Close()
		for { // the exit code follows the end of the stream
			in, err := h.cli.ContainerExecInspect(ctx, c.ID)
			if err != nil || !in.Running {
				break
			}
		}
	}
	svc := func() {
		if r := h.execute("acme", "bench", id, token, map[string]any{"command": []string{"true"}}); r.Code != http.StatusOK {
			b.Fatalf("execute: %d %s", r.Code, r.Body)
		}
	}
	var svcTimes, rawTimes []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N*pairsPerOp; i++ {
		pair := []func(){
			func() { start := time.Now(); raw(); rawTimes = append(rawTimes, time.Since(start)) },
			func() { start := time.Now(); svc(); svcTimes = append(svcTimes, time.Since(start)) },
		}
		if i%2 == 1 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		for _, m := range pair {
			m()
		}
	}
	b.StopTimer()
	median := func(ds []time.Duration) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	svcMs, rawMs := median(svcTimes), median(rawTimes)
	b.ReportMetric(svcMs, "execute-p50-ms")
	b.ReportMetric(rawMs, "docker-exec-p50-ms")
	b.ReportMetric(svcMs/rawMs, "ratio")
}
