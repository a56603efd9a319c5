package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// streamParts measures §6 (processes and files) against the engine's own
// exec and archive calls on the same container:
//
//   - buffered POST /exec round trip vs a raw exec (create, attach, inspect) of the same command
//   - streaming latency: a line's timestamp inside the sandbox vs when the NDJSON client reads it
//   - a 256 MiB file PUT and GET, each timed, vs the archive API in and out
//     (what docker cp does), and the agent's own /files beside (files.go)
var fileMiB = flag.Int("file-mib", 256, "size of the file of the files part, in MiB")

func streamParts(ctx context.Context, cli *client.Client, b *backend) {
	if !want("exec") && !want("stream") && !want("files") && !want("first-byte") && !want("watch") && !want("agent-rss") {
		return
	}
	code, body := b.do("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 1800})
	var sb struct{ SandboxID, AccessToken string }
	_ = json.Unmarshal(body, &sb)
	if code != http.StatusCreated {
		fail(fmt.Errorf("create: %d %s", code, body))
	}
	defer b.do("DELETE", "/sandboxes/"+sb.SandboxID, nil)
	cid := containerOf(ctx, cli, sb.SandboxID)
	s := &sandbox{b: b, id: sb.SandboxID, token: sb.AccessToken}
	if want("agent-rss") {
		fmt.Printf("%-28s %8.1f MiB (target ≤ 20 MiB; the agent, PID 1, in a sandbox just created)\n", "agent RSS idle (fresh)", agentRSS(ctx, cli, cid))
		defer func() {
			fmt.Printf("%-28s %8.1f MiB (target ≤ 20 MiB; the same agent after the parts above ran through it)\n", "agent RSS idle (after use)", agentRSS(ctx, cli, cid))
			// At rest: the agent hands freed memory back once quiet for a
			// second (agent/memory.go); this is the sandbox idle after use.
			time.Sleep(2 * time.Second)
			fmt.Printf("%-28s %8.1f MiB (target ≤ 20 MiB; the same, 2 s after its last request)\n", "agent RSS idle (quiet 2 s)", agentRSS(ctx, cli, cid))
		}()
	}
	if want("exec") {
		var ours, raw []time.Duration
		cmd := []string{"echo", "hello"}
		for range *samples * 2 {
			ours = append(ours, timed(func() { s.exec(cmd) }))
			raw = append(raw, timed(func() { rawExec(ctx, cli, cid, cmd) }))
		}
		report("exec round trip (buffered)", ours, raw, 0.20) // issue 22: the agent needs no engine exec per call
	}
	if want("stream") {
		lat := s.streamLatency(40)
		fmt.Printf("%-28s p50 %8.1f ms   p95 %8.1f ms   (line written in the sandbox → read by the NDJSON client; target p50 ≤ 20 ms)\n",
			"exec streaming latency", ms(pct(lat, 50)), ms(pct(lat, 95)))
	}
	if want("first-byte") {
		firstByte(ctx, cli, s, cid)
	}
	if want("watch") {
		lat := s.watchLatency(*watchEvents)
		fmt.Printf("%-28s p50 %8.1f ms   p95 %8.1f ms   (file made in the sandbox → its event read on /fs/watch; target p50 ≤ 20 ms)\n",
			"watch event latency", ms(pct(lat, 50)), ms(pct(lat, 95)))
	}
	if want("files") {
		filesPart(ctx, cli, s, cid)
	}
}

type sandbox struct {
	b         *backend
	id, token string
}

func (s *sandbox) request(method, path string, body io.Reader, size int64, accept string) *http.Response {
	req, _ := http.NewRequestWithContext(context.Background(), method, s.b.srv.URL+"/sandboxes/"+s.id+path, body)
	req.ContentLength = size
	req.Header.Set("X-API-Key", s.b.key)
	req.Header.Set("X-Access-Token", s.token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := s.b.client.Do(req)
	if err != nil {
		fail(err)
	}
	return res
}

func (s *sandbox) exec(cmd []string) {
	data, _ := json.Marshal(map[string]any{"cmd": cmd})
	res := s.request("POST", "/exec", bytes.NewReader(data), int64(len(data)), "")
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		fail(fmt.Errorf("exec: %d %s", res.StatusCode, out))
	}
}

// streamLatency runs a command printing its clock every 50 ms and returns,
// per line, how long after the print the client read it (the sandbox
// shares the host's clock).
func (s *sandbox) streamLatency(n int) []time.Duration {
	script := fmt.Sprintf("import time\nfor _ in range(%d):\n    print(time.time_ns(), flush=True)\n    time.sleep(0.05)", n)
	data, _ := json.Marshal(map[string]any{"cmd": []string{"python3", "-c", script}})
	res := s.request("POST", "/exec", bytes.NewReader(data), int64(len(data)), "application/x-ndjson")
	defer res.Body.Close()
	var out []time.Duration
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		now := time.Now()
		var ev struct{ Type, Data string }
		_ = json.Unmarshal(sc.Bytes(), &ev)
		if ev.Type != "stdout" {
			continue
		}
		for _, line := range strings.Fields(ev.Data) {
			if ns, err := strconv.ParseInt(line, 10, 64); err == nil {
				out = append(out, now.Sub(time.Unix(0, ns)))
			}
		}
	}
	if len(out) < n/2 {
		fail(fmt.Errorf("streaming: only %d of %d lines arrived", len(out), n))
	}
	return out
}

// zeros is size bytes that no compressor shrinks (a 1 MiB random block,
// repeated: beyond deflate's 32 KiB window), without holding them. Zeros
// would flatter a path that compresses.
func zeros(size int64) io.Reader { return io.LimitReader(&noiseReader{}, size) }

var noise = func() []byte {
	b := make([]byte, 1<<20)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}()

type noiseReader struct{ off int }

func (r *noiseReader) Read(b []byte) (int, error) {
	n := copy(b, noise[r.off:])
	r.off = (r.off + n) % len(noise)
	return n, nil
}

func (s *sandbox) put(path string, size int64) {
	res := s.request("PUT", "/files?path="+path, zeros(size), size, "")
	res.Body.Close()
	if res.StatusCode != 204 {
		fail(fmt.Errorf("PUT: %d", res.StatusCode))
	}
}

func (s *sandbox) get(path string, size int64) {
	res := s.request("GET", "/files?path="+path, nil, 0, "")
	n, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || n != size {
		fail(fmt.Errorf("GET: %d, %d bytes", res.StatusCode, n))
	}
}

func containerOf(ctx context.Context, cli *client.Client, record string) string {
	cs, err := cli.ContainerList(ctx, container.ListOptions{})
	if err != nil {
		fail(err)
	}
	for _, c := range cs {
		if c.Labels["dev.dreadnode.record"] == record {
			return c.ID
		}
	}
	fail(fmt.Errorf("no container for %s", record))
	return ""
}

// rawExec is what `docker exec` does: create, attach (which starts), read
// to the end, inspect the exit code.
func rawExec(ctx context.Context, cli *client.Client, id string, cmd []string) {
	c, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		fail(err)
	}
	hj, err := cli.ContainerExecAttach(ctx, c.ID, container.ExecAttachOptions{})
	if err != nil {
		fail(err)
	}
	_, _ = stdcopy.StdCopy(io.Discard, io.Discard, hj.Reader)
	hj.Close()
	if _, err := cli.ContainerExecInspect(ctx, c.ID); err != nil {
		fail(err)
	}
}

func rawCopyIn(ctx context.Context, cli *client.Client, id, dir, name string, size int64) {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg})
		_, _ = io.Copy(tw, zeros(size))
		pw.CloseWithError(tw.Close())
	}()
	if err := cli.CopyToContainer(ctx, id, dir, pr, container.CopyToContainerOptions{}); err != nil {
		fail(err)
	}
}

func rawCopyOut(ctx context.Context, cli *client.Client, id, path string, size int64) {
	rc, _, err := cli.CopyFromContainer(ctx, id, path)
	if err != nil {
		fail(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		fail(err)
	}
	if n, _ := io.Copy(io.Discard, tr); n != size {
		fail(fmt.Errorf("docker cp out: %d bytes", n))
	}
}
