package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

type events []ExecEvent

func (e *events) add(ev ExecEvent) error { *e = append(*e, ev); return nil }

func (e events) text(typ string) string {
	var b strings.Builder
	for _, ev := range e {
		if string(ev.Type) == typ {
			d, _ := ev.Bytes()
			b.Write(d)
		}
	}
	return b.String()
}

func TestExecSandboxStreamsNDJSON(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Access-Token") != "tok" || !strings.Contains(r.Header.Get("Accept"), NDJSON) {
			t.Errorf("headers %v", r.Header)
		}
		var body SandboxExec
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || strings.Join(body.Cmd, " ") != "sh -c x" {
			t.Errorf("body %+v %v", body, err)
		}
		w.Header().Set("Content-Type", NDJSON+"; charset=utf-8")
		f := w.(http.Flusher)
		for _, l := range []string{`{"type":"start","pid":7}`, `{"type":"stdout","data":"a\n"}`, `{"type":"stderr","dataB64":"/w=="}`, `{"type":"stdout","data":"b\n"}`, `{"type":"exit","exitCode":3}`} {
			fmt.Fprintln(w, l)
			f.Flush()
		}
	}))
	var got events
	code, err := c.ExecSandbox(context.Background(), "sb1", "tok", SandboxExec{Cmd: []string{"sh", "-c", "x"}}, got.add)
	if err != nil || code != 3 {
		t.Fatalf("code %d, err %v", code, err)
	}
	if got.text("stdout") != "a\nb\n" || got.text("stderr") != "\xff" || got[0].Type != "start" || got[0].Pid == nil || *got[0].Pid != 7 {
		t.Fatalf("events %+v", got)
	}
}

func TestExecSandboxBufferedFallback(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"exitCode": 2, "stdout": "out", "stderr": "err"})
	}))
	var got events
	code, err := c.ExecSandbox(context.Background(), "sb1", "tok", SandboxExec{Cmd: []string{"x"}}, got.add)
	if err != nil || code != 2 || got.text("stdout") != "out" || got.text("stderr") != "err" || got[len(got)-1].Type != "exit" {
		t.Fatalf("code %d err %v events %+v", code, err, got)
	}
}

func TestExecStreamWithoutExitIsAnError(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", NDJSON)
		fmt.Fprintln(w, `{"type":"stdout","data":"partial"}`)
	}))
	var got events
	_, err := c.ExecSandbox(context.Background(), "sb1", "tok", SandboxExec{Cmd: []string{"x"}}, got.add)
	if err == nil || !strings.Contains(err.Error(), "ended before the command's exit status") || got.text("stdout") != "partial" {
		t.Fatalf("err %v events %+v", err, got)
	}
}

func TestExecErrorsAreAPIErrorsAndNotRetried(t *testing.T) {
	n := 0
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		writeJSON(w, 503, envelope(503, "provider down", "provider_unavailable"))
	}))
	_, err := c.ExecSandbox(context.Background(), "sb1", "tok", SandboxExec{Cmd: []string{"x"}}, func(ExecEvent) error { return nil })
	if StatusOf(err) != 503 || !strings.Contains(err.Error(), "provider down") || n != 1 {
		t.Fatalf("err %v after %d attempts", err, n)
	}
}

func TestExecEnvironmentBuffered(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.Header.Get("X-Environment-Token") != "det" || body["command"] != "id | wc -c" {
			t.Errorf("token %q body %v", r.Header.Get("X-Environment-Token"), body)
		}
		writeJSON(w, 200, map[string]any{"exit_code": 124, "output": "slow", "timed_out": true, "note": "killed"})
	}))
	var got events
	code, note, err := c.ExecEnvironment(context.Background(), "o", "w", "e1", "det", EnvironmentExec{Command: "id | wc -c"}, got.add)
	if err != nil || code != 124 || note != "killed" || got.text("stdout") != "slow" {
		t.Fatalf("code %d note %q err %v events %+v", code, note, err, got)
	}
}
