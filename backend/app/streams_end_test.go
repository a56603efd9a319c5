package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Pausing, deleting or timing out a sandbox ends every open stream on it (process
// output followed, a watch, a streaming exec) with a last line
// {"type":"end","reason":...} that says why, and closes it: none hangs on
// a frozen or removed sandbox.
func TestStreamsEndWhenSandboxLeavesRunning(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, method, path, reason string
		body                       any
		code                       int
	}{
		{"pause", "POST", "/pause", "sandbox paused", nil, 204},
		{"delete", "DELETE", "", "sandbox deleted", nil, 204},
		// The TTL moved to one second from now: the reconciler kills it.
		{"ttl", "POST", "/timeout", "sandbox timed out", map[string]any{"timeout": 1}, 204},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ta := newTestApp(t, nil)
			id, tok := ta.create(map[string]any{"waitReady": true})
			base := "/sandboxes/" + id
			do := ta.sandboxDo(t, base, tok)
			pid := int(do("POST", "/processes", map[string]any{"cmd": []string{"sh", "-c", "echo up; exec sleep 600"}}, 201).json(t)["pid"].(float64))
			// The deadline only matters on failure: a stream that hangs is cut
			// by it and then has no end line.
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			type opened struct {
				name string
				next func() (event, bool)
			}
			var streams []opened
			_, exec := ta.stream(ctx, "POST", base+"/exec", tok, map[string]any{"cmd": []string{"sh", "-c", "echo up; exec sleep 300"}})
			for ev, ok := exec(); ev.Type != "stdout"; ev, ok = exec() {
				if !ok {
					t.Fatal("exec stream ended before its output")
				}
			}
			streams = append(streams, opened{"exec", exec})
			_, follow := ta.stream(ctx, "GET", fmt.Sprintf("%s/processes/%d/output", base, pid), tok, nil)
			for ev, ok := follow(); ev.Type != "stdout"; ev, ok = follow() {
				if !ok {
					t.Fatal("output stream ended before its output")
				}
			}
			streams = append(streams, opened{"follow", follow})
			_, watch := ta.stream(ctx, "GET", base+"/fs/watch?path=/tmp", tok, nil)
			if ev, _ := watch(); ev.Type != "ready" {
				t.Fatalf("watch: %+v", ev)
			}
			streams = append(streams, opened{"watch", watch})

			type result struct {
				name  string
				last  event
				lines int
				after time.Duration
			}
			results := make(chan result, len(streams))
			began := time.Now()
			for _, s := range streams {
				go func() {
					var r result
					r.name = s.name
					for ev, ok := s.next(); ok; ev, ok = s.next() {
						r.last = ev
						r.lines++
					}
					r.after = time.Since(began)
					results <- r
				}()
			}
			do(c.method, c.path, c.body, c.code)
			for range streams {
				r := <-results
				if r.last.Type != "end" || r.last.Reason != c.reason || !strings.Contains(r.last.Detail, id) {
					t.Errorf("%s stream after %s: last line %+v (%d lines), want type end, reason %q, a detail naming the sandbox",
						r.name, c.name, r.last, r.lines, c.reason)
				}
				if r.after > 60*time.Second {
					t.Errorf("%s stream ended %s after the %s", r.name, r.after, c.name)
				}
			}
		})
	}
}
