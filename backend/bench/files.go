package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

var fileRounds = flag.Int("file-rounds", 3, "rounds of the files part (each side's median is reported)")

// filesPart moves a -file-mib file in and out of one sandbox, each way
// timed alone, through §6 PUT/GET /files, through the agent's own /files
// (no backend between: what the backend hop costs), and through the
// engine's archive API (what docker cp does). Rounds are interleaved so
// the machine's drift hits every side alike; medians are reported.
func filesPart(ctx context.Context, cli *client.Client, s *sandbox, cid string) {
	size := int64(*fileMiB) << 20
	agentURL, agentToken := agentOf(ctx, s, cid)
	var put, get, aput, aget, rin, rout []time.Duration
	for range max(*fileRounds, 1) {
		put = append(put, timed(func() { s.put("/tmp/bench.bin", size) }))
		get = append(get, timed(func() { s.get("/tmp/bench.bin", size) }))
		aput = append(aput, timed(func() { agentPut(agentURL, agentToken, "/tmp/bench-agent.bin", size) }))
		aget = append(aget, timed(func() { agentGet(agentURL, agentToken, "/tmp/bench-agent.bin", size) }))
		rin = append(rin, timed(func() { rawCopyIn(ctx, cli, cid, "/tmp", "raw.bin", size) }))
		rout = append(rout, timed(func() { rawCopyOut(ctx, cli, cid, "/tmp/raw.bin", size) }))
	}
	rate := func(d time.Duration) float64 { return float64(*fileMiB) / d.Seconds() }
	line := func(name string, ours, raw time.Duration) {
		fmt.Printf("%-28s ours %8.0f MiB/s   raw %8.0f MiB/s   throughput ratio %.2f×\n", name, rate(ours), rate(raw), raw.Seconds()/ours.Seconds())
	}
	line(fmt.Sprintf("file PUT %d MiB", *fileMiB), pct(put, 50), pct(rin, 50))
	line(fmt.Sprintf("file GET %d MiB", *fileMiB), pct(get, 50), pct(rout, 50))
	line("  agent /files POST direct", pct(aput, 50), pct(rin, 50))
	line("  agent /files GET direct", pct(aget, 50), pct(rout, 50))
	ours, raw := pct(put, 50)+pct(get, 50), pct(rin, 50)+pct(rout, 50)
	fmt.Printf("%-28s ours %8.0f MiB/s   raw %8.0f MiB/s   throughput ratio %.2f× (target ≥ 1.00×; PUT+GET vs archive API in+out, median of %d)\n",
		fmt.Sprintf("file PUT+GET %d MiB", *fileMiB), 2*float64(*fileMiB)/ours.Seconds(), 2*float64(*fileMiB)/raw.Seconds(), raw.Seconds()/ours.Seconds(), max(*fileRounds, 1))
}

// agentOf is the agent's base URL and token in container cid, as the
// bench backend's provider finds them (the token is in nothing the engine
// shows: the provider derives it).
func agentOf(ctx context.Context, s *sandbox, cid string) (string, string) {
	loc, ok := s.b.app.Provider.(compute.EnvdLocator)
	if !ok {
		fail(fmt.Errorf("the bench backend's provider %s does not locate agents", s.b.app.Provider.Name()))
	}
	url, token, err := loc.Envd(ctx, compute.Ref{ID: cid})
	if err != nil {
		fail(err)
	}
	return url, token
}

func agentDo(method, base, token, path string, body io.Reader, size int64) *http.Response {
	req, _ := http.NewRequestWithContext(context.Background(), method, base+"/files?"+url.Values{"path": {path}}.Encode(), body)
	req.ContentLength = size
	req.Header.Set("X-Access-Token", token)
	req.Header.Set("Accept-Encoding", "identity")
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fail(err)
	}
	return res
}

func agentPut(base, token, path string, size int64) {
	res := agentDo("POST", base, token, path, zeros(size), size)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		fail(fmt.Errorf("agent POST /files: %d", res.StatusCode))
	}
}

func agentGet(base, token, path string, size int64) {
	res := agentDo("GET", base, token, path, nil, 0)
	n, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || n != size {
		fail(fmt.Errorf("agent GET /files: %d, %d bytes", res.StatusCode, n))
	}
}
