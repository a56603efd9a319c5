package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Public sandbox states (API §1): the document's SandboxState enum, as
// the strings Sandbox.State carries.
const (
	SandboxStarting  = string(apitypes.SandboxStateStarting)
	SandboxRunning   = string(apitypes.SandboxStateRunning)
	SandboxPaused    = string(apitypes.SandboxStatePaused)
	SandboxCompleted = string(apitypes.SandboxStateCompleted)
	SandboxFailed    = string(apitypes.SandboxStateFailed)
	SandboxDeleted   = string(apitypes.SandboxStateDeleted)
)

// SandboxGone reports whether a sandbox in state will never run again, so
// Terraform should treat it as gone: a terminal state of the document, or
// a state the document does not define (nothing this client can wait on;
// "" is no state yet, not gone).
func SandboxGone(state string) bool {
	switch apitypes.SandboxState(state) {
	case apitypes.SandboxStateCompleted, apitypes.SandboxStateFailed, apitypes.SandboxStateDeleted:
		return true
	}
	return state != "" && !apitypes.SandboxState(state).Valid()
}

// SandboxNetwork is the network policy of a sandbox.
type SandboxNetwork = apitypes.SandboxNetwork

// SandboxResources are the requested resources of a sandbox.
type SandboxResources = apitypes.SandboxResources

// SandboxCreate is the body of POST /sandboxes.
type SandboxCreate = apitypes.CreateSandbox

// Endpoint is one reachable service of a sandbox or task environment:
// {"url", "host", "port"}, the one shape of service URLs in the document.
type Endpoint = apitypes.ServiceURL

// Sandbox is the detail of a sandbox (create, get, list and connect
// answers): the document's Sandbox, read leniently where servers have
// differed. Diagnostic is kept raw (E2B-style servers send an object) and
// ServiceURLs also accepts the plain URL strings of older backends.
type Sandbox struct {
	apitypes.Sandbox
	Diagnostic json.RawMessage `json:"diagnostic"`
	// ServiceURLs maps a service (or port) name to where it is reachable.
	ServiceURLs Endpoints `json:"serviceURLs"`
}

// DiagnosticText renders the sandbox's diagnostic for a user.
func (s *Sandbox) DiagnosticText() string { return rawText(s.Diagnostic) }

// Endpoints decodes a map of endpoints whose values are either objects
// ({"url","host","port"}) or plain URL strings.
type Endpoints map[string]Endpoint

// UnmarshalJSON implements json.Unmarshaler.
func (e *Endpoints) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*e = nil
		return nil
	}
	out := make(Endpoints, len(raw))
	for k, v := range raw {
		var ep Endpoint
		if err := json.Unmarshal(v, &ep); err == nil { // the document's shape
			out[k] = ep
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		out[k] = endpointFromURL(s)
	}
	*e = out
	return nil
}

// endpointFromURL reads an older backend's plain URL as an Endpoint.
func endpointFromURL(s string) Endpoint {
	ep := Endpoint{URL: s}
	if u, err := url.Parse(s); err == nil {
		ep.Host = u.Hostname()
		if p := u.Port(); p != "" {
			var n int
			for _, c := range p {
				n = n*10 + int(c-'0')
			}
			ep.Port = n
		}
	}
	return ep
}

// rawText renders a JSON diagnostic/error value (string, object or list) as text.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err == nil {
		var parts []string
		for _, k := range []string{"message", "detail", "reason", "error"} {
			if v, ok := obj[k].(string); ok && v != "" {
				parts = append(parts, v)
			}
		}
		if len(parts) > 0 {
			if kind, ok := obj["kind"].(string); ok && kind != "" {
				return kind + ": " + strings.Join(parts, "; ")
			}
			if kind, ok := obj["type"].(string); ok && kind != "" {
				return kind + ": " + strings.Join(parts, "; ")
			}
			return strings.Join(parts, "; ")
		}
	}
	return string(raw)
}

// CreateSandbox creates a sandbox (POST /sandboxes). idempotencyKey makes
// the call safe to retry; pass NewIdempotencyKey().
func (c *Client) CreateSandbox(ctx context.Context, in SandboxCreate, idempotencyKey string) (*Sandbox, error) {
	var out Sandbox
	err := c.do(ctx, request{method: http.MethodPost, path: "/sandboxes", body: in, out: &out, idempotencyKey: idempotencyKey})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSandbox returns a sandbox (GET /sandboxes/{id}).
func (c *Client) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	var out Sandbox
	if err := c.do(ctx, request{method: http.MethodGet, path: "/sandboxes/" + url.PathEscape(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSandbox deletes a sandbox (DELETE /sandboxes/{id}).
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/sandboxes/" + url.PathEscape(id)})
}

// PauseSandbox pauses a running sandbox (POST /sandboxes/{id}/pause).
func (c *Client) PauseSandbox(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(id) + "/pause"})
}

// ConnectSandbox resumes a paused sandbox, sets its timeout and returns the
// connection data with a fresh access token (POST /sandboxes/{id}/connect).
func (c *Client) ConnectSandbox(ctx context.Context, id string, timeoutSec int64) (*Sandbox, error) {
	var out Sandbox
	t := int(timeoutSec)
	body := apitypes.ConnectSandbox{Timeout: &t}
	if err := c.do(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(id) + "/connect", body: body, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetSandboxTimeout sets the sandbox's TTL to timeoutSec from now
// (POST /sandboxes/{id}/timeout).
func (c *Client) SetSandboxTimeout(ctx context.Context, id string, timeoutSec int64) error {
	body := apitypes.SetSandboxTimeout{Timeout: int(timeoutSec)}
	return c.do(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(id) + "/timeout", body: body})
}

// ListSandboxes lists the sandboxes of the key's org (GET /sandboxes),
// following the X-Next-Token cursor. states and metadata filter on the
// server (without states the server lists live sandboxes: starting, running,
// paused); callers should filter again, as metadata pairs the server's
// "k=v&k2=v2" syntax cannot carry are not sent.
func (c *Client) ListSandboxes(ctx context.Context, states []string, metadata map[string]string) ([]Sandbox, error) {
	var all []Sandbox
	cursor := ""
	for page := 0; page < 10000; page++ {
		q := url.Values{}
		if len(states) > 0 {
			q.Set("state", strings.Join(states, ","))
		}
		if len(metadata) > 0 {
			keys := make([]string, 0, len(metadata))
			for k := range metadata {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var pairs []string
			for _, k := range keys {
				v := metadata[k]
				if strings.ContainsAny(k, "&=") || strings.ContainsAny(v, "&") {
					continue
				}
				pairs = append(pairs, k+"="+v)
			}
			if len(pairs) > 0 {
				q.Set("metadata", strings.Join(pairs, "&"))
			}
		}
		q.Set("limit", "100")
		if cursor != "" {
			q.Set("nextToken", cursor)
		}
		var raw json.RawMessage
		var hdr http.Header
		if err := c.do(ctx, request{method: http.MethodGet, path: "/sandboxes", query: q, out: &raw, respHeader: &hdr}); err != nil {
			return nil, err
		}
		items, next, err := decodePage[Sandbox](raw, "items", "sandboxes")
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if h := hdr.Get("X-Next-Token"); h != "" {
			next = h
		}
		if next == "" || next == cursor {
			break
		}
		cursor = next
	}
	return all, nil
}

// decodePage decodes a bare JSON list, or an object holding the list under
// one of keys with an optional next cursor.
func decodePage[T any](raw json.RawMessage, keys ...string) ([]T, string, error) {
	var list []T
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, "", nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, "", err
	}
	for _, k := range keys {
		if v, ok := obj[k]; ok {
			if err := json.Unmarshal(v, &list); err != nil {
				return nil, "", err
			}
			break
		}
	}
	var next string
	for _, k := range []string{"next_cursor", "nextCursor", "next_token", "nextToken"} {
		if v, ok := obj[k]; ok {
			_ = json.Unmarshal(v, &next)
			if next != "" {
				break
			}
		}
	}
	return list, next, nil
}

// TimeText renders a time of an answer as the server wrote it (RFC 3339,
// UTC); nil, a time not set, is "".
func TimeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// SandboxForkResult is one fork's outcome: the sandbox (with its access
// token, in this answer only) or the error that kept it from being made.
type SandboxForkResult struct {
	Sandbox *Sandbox        `json:"sandbox"`
	Error   json.RawMessage `json:"error"`
}

// ErrorText renders the fork's error for a user ("" when it was made).
func (r *SandboxForkResult) ErrorText() string { return rawText(r.Error) }

// ForkSandbox forks a running or paused sandbox (API.md §14): one entry per
// fork, in order; with waitReady each answered once it runs or failed.
func (c *Client) ForkSandbox(ctx context.Context, id string, in apitypes.ForkSandbox) ([]SandboxForkResult, error) {
	var out []SandboxForkResult
	err := c.do(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(id) + "/fork", body: in, out: &out})
	return out, err
}
