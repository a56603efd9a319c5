package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// NDJSON is the media type of streamed command output (API §6).
const NDJSON = "application/x-ndjson"

// ExecEvent is one event of a streamed command run (API §6): the
// document's ProcessEvent, type "start" (Pid), "stdout"/"stderr" (Data, or
// DataB64 when not UTF-8), last "exit" (ExitCode), or "error"/"end" (Code,
// Detail, Reason) when the stream is cut short.
type ExecEvent struct {
	apitypes.ProcessEvent
	// ExitCodeSnake is exit_code, as task environments may spell it.
	ExitCodeSnake *int `json:"exit_code,omitempty"`
}

// Bytes is the event's output (Data, or DataB64, decoded when read).
func (e *ExecEvent) Bytes() ([]byte, error) {
	if len(e.DataB64) > 0 {
		return e.DataB64, nil
	}
	return []byte(e.Data), nil
}

// Exit returns the exit code of an "exit" event.
func (e *ExecEvent) Exit() (int, bool) {
	switch {
	case e.ExitCode != nil:
		return *e.ExitCode, true
	case e.ExitCodeSnake != nil:
		return *e.ExitCodeSnake, true
	}
	return 0, false
}

// SandboxExec is the body of POST /sandboxes/{id}/exec: the document's
// ExecSandbox (timeoutMs in milliseconds, 1..600000).
type SandboxExec = apitypes.ExecSandbox

// ExecSandbox runs a command in a running sandbox with its access token and
// calls onEvent for each event as it arrives. It asks for NDJSON; a server
// that answers with one JSON document instead ({"exitCode","stdout",
// "stderr"}) is replayed as stdout, stderr and exit events. It returns the
// command's exit code.
func (c *Client) ExecSandbox(ctx context.Context, id, accessToken string, in SandboxExec, onEvent func(ExecEvent) error) (int, error) {
	path := "/sandboxes/" + url.PathEscape(id) + "/exec"
	hdr := map[string]string{"X-Access-Token": accessToken, "Accept": NDJSON, "Content-Type": "application/json"}
	resp, err := c.stream(ctx, http.MethodPost, path, nil, hdr, in)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if isNDJSON(resp) {
		return readEvents(resp, http.MethodPost, path, onEvent)
	}
	var out struct {
		ExitCode int    `json:"exitCode"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("POST %s: decoding the response: %w", path, err)
	}
	return replay(out.ExitCode, out.Stdout, out.Stderr, onEvent)
}

// EnvironmentExec is the body of POST /environments/{id}/execute.
type EnvironmentExec struct {
	// Command is a string (run with sh -c) or a list of arguments.
	Command    any    `json:"command"`
	TimeoutSec *int64 `json:"timeout_sec,omitempty"`
}

// EnvironmentExecResult is the buffered answer of POST /execute: the
// document's TaskExecResult.
type EnvironmentExecResult = apitypes.TaskExecResult

// ExecEnvironment runs a command in a ready task environment with its
// execute token, streaming like ExecSandbox when the server streams. note
// receives the buffered answer's note (timeout, truncation), if any.
func (c *Client) ExecEnvironment(ctx context.Context, org, ws, id, executeToken string, in EnvironmentExec, onEvent func(ExecEvent) error) (code int, note string, err error) {
	path := c.envPath(org, ws, "/"+url.PathEscape(id)+"/execute")
	hdr := map[string]string{"X-Environment-Token": executeToken, "Accept": NDJSON, "Content-Type": "application/json"}
	resp, err := c.stream(ctx, http.MethodPost, path, nil, hdr, in)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if isNDJSON(resp) {
		code, err := readEvents(resp, http.MethodPost, path, onEvent)
		return code, "", err
	}
	var out EnvironmentExecResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, "", fmt.Errorf("POST %s: decoding the response: %w", path, err)
	}
	code, err = replay(out.ExitCode, out.Output, "", onEvent)
	return code, out.Note, err
}

func isNDJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == NDJSON
}

func replay(code int, stdout, stderr string, onEvent func(ExecEvent) error) (int, error) {
	for _, ev := range []ExecEvent{{ProcessEvent: apitypes.ProcessEvent{Type: apitypes.ProcessEventTypeStdout, Data: stdout}}, {ProcessEvent: apitypes.ProcessEvent{Type: apitypes.ProcessEventTypeStderr, Data: stderr}}} {
		if ev.Data == "" {
			continue
		}
		if err := onEvent(ev); err != nil {
			return 0, err
		}
	}
	return code, onEvent(ExecEvent{ProcessEvent: apitypes.ProcessEvent{Type: apitypes.ProcessEventTypeExit, ExitCode: &code}})
}

// readEvents decodes NDJSON events until "exit"; a stream that ends without
// one is an error (the connection or the server broke off).
func readEvents(resp *http.Response, method, path string, onEvent func(ExecEvent) error) (int, error) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var ev ExecEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return 0, fmt.Errorf("%s %s: decoding an output event: %w", method, path, err)
		}
		if err := onEvent(ev); err != nil {
			return 0, err
		}
		if ev.Type == apitypes.ProcessEventTypeError {
			return 0, fmt.Errorf("%s %s: the command failed on the server: %s", method, path, ev.Detail)
		}
		if code, ok := ev.Exit(); ok && ev.Type == apitypes.ProcessEventTypeExit {
			return code, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s %s: reading the output stream: %w", method, path, err)
	}
	return 0, fmt.Errorf("%s %s: the output stream ended before the command's exit status", method, path)
}
