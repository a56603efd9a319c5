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

// A sandbox that floods what the backend reads from it (64 MiB of a
// process's output replayed, a listing of 100k entries, 64 MiB of NUL
// bytes on both streams of a buffered exec, a streamed exec of 64 MiB with
// /bin/sh replaced) costs the backend a bounded amount of memory, four
// requests at once, and each refused answer is a clear error without host
// paths. (A hostile agent's declared message lengths: compute/envd's tests.)
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

	// 1. A process that printed 64 MiB: four replays at once of what the
	// agent kept (its last MiB or so) pass through without being held.
	r := do("POST", "/processes", map[string]any{"cmd": []string{"bash", "-c", fmt.Sprintf("head -c %d /dev/zero; exec sleep 600", forged)}}, 201)
	pid := int(r.json(t)["pid"].(float64))
	details := make([]string, 4)
	replayed := make([]int, 4)
	grew := heapGrowth(func() {
		fourAtOnce(func(i int) {
			_, next := ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output?follow=false", base, pid), tok, nil)
			for ev, ok := next(); ok; ev, ok = next() {
				switch ev.Type {
				case "stdout":
					replayed[i] += len(ev.Data)
				case "error":
					details[i] = ev.Detail
				}
			}
		})
	})
	t.Logf("replay of 64 MiB of output: the heap grew by %d KiB", grew>>10)
	if grew >= bound {
		t.Errorf("four replays of 64 MiB of output grew the heap by %d MiB", grew>>20)
	}
	for i, n := range replayed {
		if n > forged || details[i] != "" {
			t.Errorf("replay: %d bytes, error %q", n, details[i])
		}
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
	sh(fmt.Sprintf(`mkdir -p /dev/shm/few && touch /dev/shm/few/%d`, pid))
	var list []map[string]any
	if err := json.Unmarshal(do("GET", "/fs?path=/dev/shm/few", nil, 200).body, &list); err != nil || len(list) != 1 || list[0]["name"] != strconv.Itoa(pid) {
		t.Errorf("listing /dev/shm/few: %v %v, want its one file", list, err)
	}

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
	want := int64(len(`{"exitCode":0,"stderr":"","stdout":"","truncated":true}`+"\n") + 2*len(`\u0000`)*compute.MaxExecOutputBytes)
	for i := range codes {
		if codes[i] != 200 || sizes[i] != want {
			t.Errorf("buffered exec of 2 x 64 MiB: %d, %d bytes (want 200, %d bytes) %s", codes[i], sizes[i], want, details[i])
		}
	}

	// 5. A /bin/sh replaced by one that prints no pid line (the stream
	// needs no shell: the agent reports the pid) and a streamed exec of 64
	// MiB: every byte flows, four at once, without being held.
	details = make([]string, 4)
	sh(`printf '#!/bin/bash\nexit 99\n' > /tmp/sh && chmod +x /tmp/sh && ln -sf /tmp/sh /bin/sh`)
	got := make([]int, 4)
	grew = heapGrowth(func() {
		fourAtOnce(func(i int) {
			_, next := ta.stream(context.Background(), "POST", base+"/exec", tok, map[string]any{
				"cmd": []string{"bash", "-c", fmt.Sprintf(`head -c %d /dev/zero | tr "\0" x`, forged)}, "timeoutMs": 300000})
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
	t.Logf("streamed exec of 64 MiB: the heap grew by %d KiB", grew>>10)
	if grew >= bound {
		t.Errorf("four streamed execs of 64 MiB grew the heap by %d MiB", grew>>20)
	}
	for i, n := range got {
		if n != forged || details[i] != "" {
			t.Errorf("streamed exec with /bin/sh replaced: %d bytes of stdout (want %d), error %q", n, forged, details[i])
		}
	}
}
