package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// forged is how much a hostile sandbox writes in each case below: enough
// that holding it four times over would show far above the bound.
const forged = 64 << 20

// heapGrowth runs f and returns how far the heap in use rose above what it
// was before (the peak, sampled while f runs). The collector runs more often
// meanwhile, so the peak is what is held rather than garbage not yet
// collected (the streams below move 256 MiB through the backend).
func heapGrowth(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	stop := peakHeap()
	f()
	peak := stop()
	if peak < base {
		return 0
	}
	return peak - base
}

// detailOf is an error answer's detail ("" for another body); it is safe
// off the test's goroutine.
func detailOf(r resp) string {
	var e struct {
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Detail
}

// fourAtOnce runs f four times concurrently and waits for them.
func fourAtOnce(f func(i int)) {
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

// A sandbox that forges what the backend reads from it (a frame announcing
// 1 GiB in a process's output file, a listing of 100k entries, a python3
// that answers with 64 MiB without a newline, 64 MiB of NUL bytes on both
// streams of a buffered exec, a /bin/sh that never writes the pid line) costs the backend a bounded amount of memory, four requests
// at once, and each forged answer is a clear error without host paths.
// Not parallel: the heap is measured for the whole test process.
func TestHostileSandboxOutputIsBounded(t *testing.T) {
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id
	do := ta.sandboxDo(t, base, tok)
	sh := func(script string) {
		t.Helper()
		r := do("POST", "/exec", map[string]any{"cmd": []string{"bash", "-c", script}, "timeoutMs": 120000}, 200)
		if m := r.json(t); m["exitCode"].(float64) != 0 {
			t.Fatalf("%s: %v", script, m)
		}
	}
	const bound = 64 << 20
	checkDetail := func(what, detail, want string) {
		t.Helper()
		if !strings.Contains(detail, want) || strings.Contains(detail, "/var/lib/docker") || strings.Contains(detail, "Traceback") {
			t.Errorf("%s: detail %q, want one that says %q and quotes no host path", what, detail, want)
		}
	}

	// 1. A frame that announces 1 GiB, followed by 64 MiB, in the output
	// file of a running process.
	r := do("POST", "/processes", map[string]any{"cmd": []string{"sleep", "600"}}, 201)
	pid := int(r.json(t)["pid"].(float64))
	sh(fmt.Sprintf(`printf '\001\100\000\000\000' > /run/dreadnode/proc/%d/out && head -c %d /dev/zero >> /run/dreadnode/proc/%d/out`, pid, forged, pid))
	details := make([]string, 4)
	grew := heapGrowth(func() {
		fourAtOnce(func(i int) {
			_, next := ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output?follow=false", base, pid), tok, nil)
			for ev, ok := next(); ok; ev, ok = next() {
				if ev.Type == "error" {
					details[i] = ev.Detail
				}
			}
		})
	})
	t.Logf("forged frame: the heap grew by %d KiB", grew>>10)
	if grew >= bound {
		t.Errorf("four reads of a forged 1 GiB frame grew the heap by %d MiB", grew>>20)
	}
	for _, d := range details {
		checkDetail("forged frame", d, "the sandbox sent a frame of 1073741824 bytes, over the 1048576-byte bound")
	}

	// 2. A directory of 100k entries.
	sh(`mkdir /dev/shm/many && cd /dev/shm/many && seq -f 'f%06g' 1 100000 | xargs touch`)
	codes := make([]int, 4)
	grew = heapGrowth(func() {
		fourAtOnce(func(i int) {
			r := ta.req("GET", base+"/fs?path=/dev/shm/many", nil, "X-Access-Token", tok)
			codes[i], details[i] = r.code, detailOf(r)
		})
	})
	t.Logf("100k entries: the heap grew by %d KiB", grew>>10)
	if grew >= bound/2 {
		t.Errorf("four listings of 100k entries grew the heap by %d MiB", grew>>20)
	}
	for i, d := range details {
		if codes[i] != 400 {
			t.Errorf("listing of 100k entries: %d, want 400", codes[i])
		}
		checkDetail("100k entries", d, "/dev/shm/many holds more than 10000 entries")
	}
	// A listing under the bound still works.
	var list []map[string]any
	if err := json.Unmarshal(do("GET", "/fs?path=/run/dreadnode/proc", nil, 200).body, &list); err != nil || len(list) != 1 || list[0]["name"] != strconv.Itoa(pid) {
		t.Errorf("listing /run/dreadnode/proc: %v %v, want the one process's directory", list, err)
	}

	// 3. A python3 (the helper's interpreter) that answers with 64 MiB and
	// no newline.
	sh(fmt.Sprintf(`printf '#!/bin/bash\nhead -c %d /dev/zero | tr "\\0" x\n' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3`, forged))
	grew = heapGrowth(func() {
		fourAtOnce(func(i int) {
			r := ta.req("GET", base+"/fs?path=/tmp", nil, "X-Access-Token", tok)
			codes[i], details[i] = r.code, detailOf(r)
		})
	})
	t.Logf("endless helper line: the heap grew by %d KiB", grew>>10)
	if grew >= bound {
		t.Errorf("four endless helper answers grew the heap by %d MiB", grew>>20)
	}
	for i, d := range details {
		if codes[i] != 502 {
			t.Errorf("listing through a forged python3: %d, want 502", codes[i])
		}
		checkDetail("endless line", d, "a line over the 65536-byte bound")
	}
	r = do("GET", "/processes", nil, 502)
	checkDetail("process list", r.json(t)["detail"].(string), "over the 4194304-byte bound")

	// 4. 64 MiB of NUL bytes (six bytes each in JSON) on stdout and on
	// stderr of a buffered exec: the first MiBs are kept, and encoded as
	// they are sent.
	sizes := make([]int64, 4)
	grew = heapGrowth(func() {
		fourAtOnce(func(i int) {
			body := strings.NewReader(fmt.Sprintf(`{"cmd": ["bash", "-c", "head -c %d /dev/zero; head -c %d /dev/zero >&2"]}`, forged, forged))
			req, _ := http.NewRequest("POST", ta.srv.URL+base+"/exec", body)
			req.Header.Set("X-API-Key", ta.key)
			req.Header.Set("X-Access-Token", tok)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				details[i] = err.Error()
				return
			}
			defer res.Body.Close()
			codes[i] = res.StatusCode
			sizes[i], _ = io.Copy(io.Discard, res.Body)
		})
	})
	t.Logf("buffered exec of 2 x 64 MiB: the heap grew by %d KiB", grew>>10)
	if grew >= bound {
		t.Errorf("four buffered execs of 2 x 64 MiB grew the heap by %d MiB", grew>>20)
	}
	want := int64(len(`{"exitCode":0,"stderr":"","stdout":""}`+"\n") + 2*len(`\u0000`)*compute.MaxExecOutputBytes)
	for i := range codes {
		if codes[i] != 200 || sizes[i] != want {
			t.Errorf("buffered exec of 2 x 64 MiB: %d, %d bytes (want 200, %d bytes) %s", codes[i], sizes[i], want, details[i])
		}
	}

	// 5. A /bin/sh that never writes the pid line and prints 64 MiB on
	// stdout: the stream starts anyway (pid 0) and the output flows.
	details = make([]string, 4)
	sh(fmt.Sprintf(`printf '#!/bin/bash\nhead -c %d /dev/zero | tr "\\0" x\n' > /tmp/sh && chmod +x /tmp/sh && ln -sf /tmp/sh /bin/sh`, forged))
	got := make([]int, 4)
	grew = heapGrowth(func() {
		fourAtOnce(func(i int) {
			_, next := ta.stream(context.Background(), "POST", base+"/exec", tok, map[string]any{"cmd": []string{"true"}})
			for ev, ok := next(); ok; ev, ok = next() {
				switch ev.Type {
				case "stdout":
					got[i] += len(ev.Data)
				case "error":
					details[i] = ev.Detail
				}
			}
		})
	})
	t.Logf("replaced /bin/sh: the heap grew by %d KiB", grew>>10)
	if grew >= bound {
		t.Errorf("four execs through a /bin/sh without pid line grew the heap by %d MiB", grew>>20)
	}
	for i, n := range got {
		if n != forged || details[i] != "" {
			t.Errorf("exec through a /bin/sh without pid line: %d bytes of stdout (want %d), error %q", n, forged, details[i])
		}
	}
}
