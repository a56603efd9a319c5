package app

import (
	"context"
	"strings"
	"testing"
)

// A command that cannot be found is one answer on both forms of exec: a
// run with exit code 127 and the reason on stderr, as a shell (and E2B's
// envd) answers it.
func TestMissingBinaryIsExit127OnBothExecForms(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	body := map[string]any{"cmd": []string{"no-such-program", "x"}}
	r := ta.req("POST", "/sandboxes/"+id+"/exec", body, "X-Access-Token", tok)
	m := r.json(t)
	if r.code != 200 || m["exitCode"] != 127.0 || !strings.Contains(m["stderr"].(string), "no-such-program") {
		t.Errorf("JSON exec of a missing program: %d %s, want 200 with exit 127 naming it", r.code, r.body)
	}
	res, next := ta.stream(context.Background(), "POST", "/sandboxes/"+id+"/exec", tok, body)
	first, ok := next()
	_, stderr, code := drain(next)
	if res.StatusCode != 200 || !ok || first.Type != "start" || code != 127 || !strings.Contains(stderr, "no-such-program") {
		t.Errorf("NDJSON exec of a missing program: %d, first %+v, stderr %q, exit %d; want 200, start, stderr naming it, exit 127",
			res.StatusCode, first, stderr, code)
	}
}
