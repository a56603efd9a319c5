package ndjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

func TestEventsKeepCharactersWhole(t *testing.T) {
	rec := httptest.NewRecorder()
	w := New(rec, httptest.NewRequest(http.MethodPost, "/sandboxes/sb1/exec", nil))
	euro := []byte("€") // 3 bytes, split across chunks
	for _, ev := range []compute.ProcessEvent{
		{Type: compute.EventStart, PID: 7},
		{Type: compute.EventStdout, Data: append([]byte("a"), euro[:2]...)},
		{Type: compute.EventStderr, Data: []byte("err")},
		{Type: compute.EventStdout, Data: append(euro[2:], 'b')},
		{Type: compute.EventStdout, Data: []byte{0xff, 0xfe}},
		{Type: compute.EventExit, ExitCode: 3},
	} {
		if err := w.Event(ev); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"type":"start","pid":7}
{"type":"stdout","data":"a"}
{"type":"stderr","data":"err"}
{"type":"stdout","data":"€b"}
{"type":"stdout","dataB64":"//4="}
{"type":"exit","exitCode":3}
`
	if rec.Code != 200 || rec.Header().Get("Content-Type") != ContentType || rec.Body.String() != want || !rec.Flushed {
		t.Fatalf("%d %q:\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

func TestFinish(t *testing.T) {
	// Before any line: the error is the answer.
	w := New(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
	err := httpx.NewError(404, "not_found", "no such process")
	if got := w.Finish(err); !errors.Is(got, err) {
		t.Fatalf("Finish before a line: %v", got)
	}
	// After a line: a last error line with the code.
	rec := httptest.NewRecorder()
	w = New(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	_ = w.Line(map[string]string{"type": "ready"})
	if got := w.Finish(err); got != nil {
		t.Fatalf("Finish after a line: %v", got)
	}
	if !strings.HasSuffix(rec.Body.String(), `{"type":"error","code":404,"detail":"no such process"}`+"\n") {
		t.Fatalf("body: %s", rec.Body)
	}
	// Anything else is a 500 line without internals.
	rec = httptest.NewRecorder()
	w = New(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	_ = w.Line(1)
	_ = w.Finish(errors.New("secret internals"))
	if strings.Contains(rec.Body.String(), "secret") || !strings.Contains(rec.Body.String(), `"code":500`) {
		t.Fatalf("body: %s", rec.Body)
	}
}

func TestWanted(t *testing.T) {
	for accept, want := range map[string]bool{"application/x-ndjson": true, "application/json, application/x-ndjson;q=0.9": true,
		"application/json": false, "": false} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Accept", accept)
		if Wanted(r) != want {
			t.Errorf("Accept %q: %v", accept, !want)
		}
	}
}

// A stream that fails with a 5xx after its 200 went out ends with an
// "error" line that no handler sees: Finish logs it once, at WARN, with
// the method, path and detail. Before the first line the error is the
// handler's to return (and httpx.Handler's to log): Finish logs nothing.
func TestFinishLogsServerErrorsOnce(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	err := &domain.UnavailableError{Detail: "cannot reach the sandbox agent in sandbox sb1"}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/sandboxes/sb1/exec", nil)

	w := New(httptest.NewRecorder(), req)
	if got := w.Finish(err); got == nil {
		t.Fatal("Finish before a line swallowed the error")
	}
	if buf.Len() != 0 {
		t.Fatalf("Finish before a line logged: %s", buf.String())
	}

	rec := httptest.NewRecorder()
	w = New(rec, req)
	_ = w.Line(map[string]string{"type": "start"})
	_ = w.Finish(err)
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var l map[string]any
	if len(lines) != 1 || json.Unmarshal(lines[0], &l) != nil {
		t.Fatalf("want one log line, got %q", buf.String())
	}
	if l["level"] != "WARN" || l["path"] != "/api/v1/sandboxes/sb1/exec" || l["status"] != float64(503) || l["detail"] != err.Detail {
		t.Fatalf("log line %v", l)
	}

	buf.Reset()
	w = New(httptest.NewRecorder(), req)
	_ = w.Line(1)
	_ = w.Finish(httpx.Conflict("the sandbox was paused"))
	if buf.Len() != 0 {
		t.Fatalf("a 409 line was logged: %s", buf.String())
	}
}
