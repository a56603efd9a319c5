package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

// hostileOutput is how much a sandbox writes through each route below.
const hostileOutput = 300 << 20

// maxGrowth bounds how far the backend's resident set may rise below
// (issue 34). It was 216-262 MiB with the agent's binary held in the heap
// and GOGC=400 (a collection only at five times the live heap), 50-127 MiB
// once the binary left the heap, still at GOGC=400 (the streams' garbage:
// protobuf's copy of each 32 KiB chunk), and 18 MiB at Go's default GOGC.
const maxGrowth = 64 << 20

// The real backend binary (its own GC settings, no test harness in its
// heap) stays within maxGrowth of resident memory above where it started
// while one sandbox streams 300 MiB through each of a buffered exec (NUL
// bytes: six bytes each in JSON), a streamed (NDJSON) exec and a followed
// process's output, all at once; the buffered answer keeps its 4 MiB and
// says it was truncated. The resident set is the process's peak (VmHWM),
// so a spike between samples counts too.
func TestHostileOutputKeepsTheBackendsMemoryFlat(t *testing.T) {
	b := backendproc.Start(t, backendproc.Options{})
	res, err := b.Do(context.Background(), "POST", "/sandboxes", strings.NewReader(`{"waitReady": true, "timeout": 600}`))
	if err != nil {
		t.Fatal(err)
	}
	var sb struct{ SandboxID, AccessToken string }
	_ = json.NewDecoder(res.Body).Decode(&sb)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("create: %d", res.StatusCode)
	}
	t.Cleanup(func() {
		if res, err := b.Do(context.Background(), "DELETE", "/sandboxes/"+sb.SandboxID, nil); err == nil {
			res.Body.Close()
		}
	})
	send := func(method, path, body string, ndjson bool) (*http.Response, error) {
		req, _ := http.NewRequest(method, b.URL+"/sandboxes/"+sb.SandboxID+path, strings.NewReader(body))
		req.Header.Set("X-API-Key", b.APIKey)
		req.Header.Set("X-Access-Token", sb.AccessToken)
		req.Header.Set("Content-Type", "application/json")
		if ndjson {
			req.Header.Set("Accept", "application/x-ndjson")
		}
		return http.DefaultClient.Do(req)
	}
	// The process first waits for a file, so its whole output is followed.
	res, err = send("POST", "/processes", fmt.Sprintf(`{"cmd": ["bash", "-c", "while [ ! -e /tmp/go ]; do sleep 0.05; done; head -c %d /dev/zero | tr '\\0' x"]}`, hostileOutput), false)
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ PID int }
	_ = json.NewDecoder(res.Body).Decode(&p)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("start: %d", res.StatusCode)
	}

	base, _, err := b.Memory()
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results = map[string]string{}
	)
	run := func(name string, f func() string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := f()
			mu.Lock()
			results[name] = got
			mu.Unlock()
		}()
	}
	// streamed counts the data bytes of an NDJSON stream and its exit code.
	streamed := func(res *http.Response) string {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		n, exit := 0, "none"
		for sc.Scan() {
			var ev struct {
				Type, Data string
				ExitCode   *int
				Detail     string
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				return "not NDJSON: " + err.Error()
			}
			switch ev.Type {
			case "stdout":
				n += len(ev.Data)
			case "exit":
				exit = fmt.Sprint(*ev.ExitCode)
			case "error":
				return "error: " + ev.Detail
			}
		}
		return fmt.Sprintf("%d bytes, exit %s", n, exit)
	}
	run("buffered", func() string {
		res, err := send("POST", "/exec", fmt.Sprintf(`{"cmd": ["bash", "-c", "touch /tmp/go; head -c %d /dev/zero"], "timeoutMs": 600000}`, hostileOutput), false)
		if err != nil {
			return err.Error()
		}
		defer res.Body.Close()
		var r struct {
			ExitCode  int
			Stdout    string
			Truncated bool
		}
		if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
			return fmt.Sprintf("%d: %v", res.StatusCode, err)
		}
		return fmt.Sprintf("%d: exit %d, %d bytes kept, truncated %v", res.StatusCode, r.ExitCode, len(r.Stdout), r.Truncated)
	})
	run("ndjson", func() string {
		res, err := send("POST", "/exec", fmt.Sprintf(`{"cmd": ["bash", "-c", "head -c %d /dev/zero | tr '\\0' y"], "timeoutMs": 600000}`, hostileOutput), true)
		if err != nil {
			return err.Error()
		}
		return streamed(res)
	})
	run("process", func() string {
		res, err := send("GET", fmt.Sprintf("/processes/%d/output", p.PID), "", true)
		if err != nil {
			return err.Error()
		}
		return streamed(res)
	})
	wg.Wait()
	_, peak, err := b.Memory()
	if err != nil {
		t.Fatal(err)
	}
	grew := int64(peak) - int64(base)
	t.Logf("resident memory: %d MiB before, peak %d MiB (+%d MiB); %v", base>>20, peak>>20, grew>>20, results)
	want := fmt.Sprintf("%d bytes, exit 0", hostileOutput)
	// A follower may miss the first chunks (the agent keeps the last MiB of
	// a process with no owner), never the end.
	if results["ndjson"] != want || !strings.HasSuffix(results["process"], "bytes, exit 0") || strings.HasPrefix(results["process"], "0 bytes") {
		t.Errorf("streams: %v, want %q each", results, want)
	}
	if want := fmt.Sprintf("200: exit 0, %d bytes kept, truncated true", compute.MaxExecOutputBytes); results["buffered"] != want {
		t.Errorf("buffered exec: %s, want %s", results["buffered"], want)
	}
	if grew >= maxGrowth {
		t.Errorf("the backend's resident memory grew by %d MiB (from %d to %d MiB) while a sandbox streamed 3 x %d MiB; want under %d MiB",
			grew>>20, base>>20, peak>>20, hostileOutput>>20, maxGrowth>>20)
	}
}
