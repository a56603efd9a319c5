package tasks_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
)

// execute with Accept: application/x-ndjson streams the §6 events while the
// command runs.
func TestExecuteStreams(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, token := h.create("acme", "ws", map[string]any{"task_ref": "web-login"})
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	req, _ := http.NewRequest("POST", h.srv.URL+envPath("acme", "ws", "/", id, "/execute"),
		strings.NewReader(`{"command": "echo one; sleep 2; echo two >&2; exit 4"}`))
	req.Header.Set("X-Test-Org", "acme")
	req.Header.Set(tasks.TokenHeader, token)
	req.Header.Set("Accept", "application/x-ndjson")
	began := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("execute stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	type event struct {
		Type     string `json:"type"`
		PID      *int   `json:"pid"`
		Data     string `json:"data"`
		ExitCode *int   `json:"exitCode"`
	}
	var evs []event
	var firstOut time.Duration
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not NDJSON: %q", sc.Text())
		}
		if ev.Type == "stdout" && firstOut == 0 {
			firstOut = time.Since(began)
		}
		evs = append(evs, ev)
	}
	total := time.Since(began)
	if len(evs) != 4 || evs[0].Type != "start" || evs[0].PID == nil || *evs[0].PID <= 0 ||
		evs[1].Data != "one\n" || evs[2].Type != "stderr" || evs[2].Data != "two\n" || evs[3].Type != "exit" || *evs[3].ExitCode != 4 {
		t.Fatalf("events: %+v", evs)
	}
	if firstOut > total-time.Second {
		t.Fatalf("the first line came after %s of %s: not streamed", firstOut, total)
	}
}
