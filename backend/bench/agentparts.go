package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
)

// The agent targets (issue 22) beside what the engine does:
//
//   - first-byte: POST /exec streamed, request sent → first stdout event
//     read, vs a raw exec's create+attach → first stdout byte (p50 ≤ 5 ms)
//   - watch: a file made in the sandbox → its event read on §6's
//     /fs/watch stream (p50 ≤ 20 ms)
//   - agent-rss: the agent's resident memory in a sandbox at rest
//     (≤ 20 MiB), fresh and after the parts above ran through it
var watchEvents = flag.Int("watch-events", 40, "files made in the sandbox by the watch part")

// firstByte measures the time to the first output byte, ours and raw,
// interleaved.
func firstByte(ctx context.Context, cli *client.Client, s *sandbox, cid string) {
	base, token := agentOf(ctx, s, cid)
	direct := &envd.Client{HTTP: http.DefaultClient, URL: base, Token: token, Name: "bench", Agent: true}
	var ours, raw, agent []time.Duration
	// The order turns each round: a docker exec leaves the engine's
	// runc and shim busy in the container's CPU for a while after it,
	// so whichever always came next was measured the slowest.
	runs := []func(){
		func() { ours = append(ours, s.firstStdout([]string{"echo", "hello"})) },
		func() { raw = append(raw, rawFirstByte(ctx, cli, cid, []string{"echo", "hello"})) },
		func() { agent = append(agent, agentFirstByte(ctx, direct, []string{"echo", "hello"})) },
	}
	for i := range *samples * 2 {
		for j := range runs {
			runs[(i+j)%len(runs)]()
		}
	}
	for _, p := range []int{50, 95} {
		o, r := pct(ours, p), pct(raw, p)
		fmt.Printf("%-28s p%d ours %8.1f ms   raw %8.1f ms   ratio %.2f× (target p50 ≤ 5 ms; POST /exec NDJSON vs docker exec, to the first stdout byte)\n",
			"exec streaming first byte", p, ms(o), ms(r), float64(o)/float64(r))
	}
	fmt.Printf("%-28s p50 %8.1f ms   p95 %8.1f ms   (the agent's Start stream alone, no backend between: what the backend hop costs)\n",
		"  agent Start direct", ms(pct(agent, 50)), ms(pct(agent, 95)))
}

// agentFirstByte is the agent's own Start stream to its first stdout
// event, through the client the providers use.
func agentFirstByte(ctx context.Context, c *envd.Client, cmd []string) time.Duration {
	t0 := time.Now()
	var first time.Duration
	err := c.ExecStream(ctx, compute.ExecRequest{Cmd: cmd}, nil, func(ev compute.ProcessEvent) error {
		if ev.Type == compute.EventStdout && first == 0 {
			first = time.Since(t0)
		}
		return nil
	})
	if err != nil || first == 0 {
		fail(fmt.Errorf("agent Start: no stdout (%v)", err))
	}
	return first
}

// firstStdout streams cmd and returns how long its first stdout event
// took to reach the client; the rest is read to the end.
func (s *sandbox) firstStdout(cmd []string) time.Duration {
	data, _ := json.Marshal(map[string]any{"cmd": cmd})
	t0 := time.Now()
	res := s.request("POST", "/exec", bytes.NewReader(data), int64(len(data)), "application/x-ndjson")
	defer res.Body.Close()
	var first time.Duration
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		var ev struct{ Type string }
		_ = json.Unmarshal(sc.Bytes(), &ev)
		if ev.Type == "stdout" && first == 0 {
			first = time.Since(t0)
		}
	}
	if first == 0 {
		fail(fmt.Errorf("streamed exec: no stdout event (%d)", res.StatusCode))
	}
	return first
}

// rawFirstByte is docker exec to its first stdout byte (the engine's
// multiplexed stream: an 8-byte header, then the bytes).
func rawFirstByte(ctx context.Context, cli *client.Client, id string, cmd []string) time.Duration {
	t0 := time.Now()
	c, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		fail(err)
	}
	hj, err := cli.ContainerExecAttach(ctx, c.ID, container.ExecAttachOptions{})
	if err != nil {
		fail(err)
	}
	defer hj.Close()
	var head [9]byte
	if _, err := io.ReadFull(hj.Reader, head[:]); err != nil {
		fail(fmt.Errorf("docker exec: no output: %w", err))
	}
	d := time.Since(t0)
	_, _ = io.Copy(io.Discard, hj.Reader)
	return d
}

// watchLatency runs a watch on a fresh directory, has a process in the
// sandbox create files named by its clock every 50 ms, and returns per
// file how long after its creation the client read its first event (the
// sandbox shares the host's clock).
func (s *sandbox) watchLatency(n int) []time.Duration {
	dir := "/tmp/bench-watch-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s.mkdir(dir)
	res := s.request("GET", "/fs/watch?"+url.Values{"path": {dir}}.Encode(), nil, 0, "")
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		fail(fmt.Errorf("watch: %d %s", res.StatusCode, b))
	}
	events := readWatch(res.Body)
	if ev, ok := <-events; !ok || ev.path != "ready " {
		fail(fmt.Errorf("watch: the first event is %q, not ready", ev.path))
	}
	script := fmt.Sprintf("import time\nfor _ in range(%d):\n    open('%s/%%d' %% time.time_ns(), 'w').close()\n    time.sleep(0.05)", n, dir)
	wrote := make(chan struct{})
	go func() { defer close(wrote); s.exec([]string{"python3", "-c", script}) }()
	defer func() { <-wrote }() // the sandbox outlives the writer
	var out []time.Duration
	seen := map[string]bool{}
	timeout := time.After(time.Duration(n)*50*time.Millisecond + 30*time.Second)
	for len(seen) < n {
		select {
		case ev, ok := <-events:
			if !ok {
				fail(fmt.Errorf("watch: the stream ended after %d of %d files", len(seen), n))
			}
			typ, p, _ := strings.Cut(ev.path, " ")
			ns, err := strconv.ParseInt(path.Base(p), 10, 64)
			if typ != "create" || err != nil || seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, ev.at.Sub(time.Unix(0, ns)))
		case <-timeout:
			fail(fmt.Errorf("watch: only %d of %d files were reported", len(seen), n))
		}
	}
	return out
}

// watchEvent is one line of a watch stream: when it was read, "type path".
type watchEvent struct {
	at   time.Time
	path string
}

// readWatch reads a watch stream's lines as they come, until it ends.
func readWatch(body io.Reader) <-chan watchEvent {
	events := make(chan watchEvent, 1024)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			at := time.Now()
			var ev struct{ Type, Path string }
			_ = json.Unmarshal(sc.Bytes(), &ev)
			events <- watchEvent{at, ev.Type + " " + ev.Path}
		}
	}()
	return events
}

func (s *sandbox) mkdir(dir string) {
	data, _ := json.Marshal(map[string]any{"path": dir})
	res := s.request("POST", "/fs/mkdir", bytes.NewReader(data), int64(len(data)), "")
	res.Body.Close()
	if res.StatusCode != 204 {
		fail(fmt.Errorf("mkdir %s: %d", dir, res.StatusCode))
	}
}

// agentRSS is the resident memory of the agent (the container's PID 1)
// in MiB, as the engine's top reports it (ps on the engine's host).
func agentRSS(ctx context.Context, cli *client.Client, cid string) float64 {
	top, err := cli.ContainerTop(ctx, cid, []string{"-o", "pid,rss,args"})
	if err != nil {
		fail(fmt.Errorf("docker top: %w", err))
	}
	col := -1
	for i, t := range top.Titles {
		if t == "RSS" {
			col = i
		}
	}
	for _, p := range top.Processes {
		if col >= 0 && col < len(p) && strings.Contains(strings.Join(p, " "), "dn-agent") {
			kib, err := strconv.ParseFloat(p[col], 64)
			if err == nil {
				return kib / 1024
			}
		}
	}
	fail(fmt.Errorf("docker top of %s: no dn-agent process in %v", cid, top.Processes))
	return 0
}
