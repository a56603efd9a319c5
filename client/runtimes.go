package client

import (
	"context"
	"net/http"
	"net/url"
)

// RuntimeResources are a runtime's sandbox resources (nil: template default).
type RuntimeResources struct {
	CPUCount *int64 `json:"cpu_count,omitempty"`
	MemoryMB *int64 `json:"memory_mb,omitempty"`
}

// RuntimeCreate is the body of POST /runtimes (API §4).
type RuntimeCreate struct {
	Name       string            `json:"name"`
	Template   string            `json:"template,omitempty"`
	Resources  *RuntimeResources `json:"resources,omitempty"`
	EnvVars    map[string]string `json:"env_vars,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	TimeoutSec *int64            `json:"timeout_sec,omitempty"`
}

// Runtime is a runtime of a workspace: idle, running or paused, with its
// current ledger record as Instance.
type Runtime struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Organization  string            `json:"organization"`
	Workspace     string            `json:"workspace"`
	Template      string            `json:"template"`
	Resources     RuntimeResources  `json:"resources"`
	TimeoutSec    int64             `json:"timeout_sec"`
	EnvVarNames   []string          `json:"env_var_names"`
	Metadata      map[string]string `json:"metadata"`
	State         string            `json:"state"`
	SandboxID     *string           `json:"sandbox_id"`
	LastSandboxID *string           `json:"last_sandbox_id"`
	Instance      *LedgerEntry      `json:"instance"`
	CreatedAt     string            `json:"created_at"`
	UpdatedAt     string            `json:"updated_at"`
	// SandboxToken is the sandbox's access token; only start returns it.
	SandboxToken string `json:"sandbox_token,omitempty"`
}

// Keepalive is the answer of POST /runtimes/{id}/keepalive.
type Keepalive struct {
	ID        string  `json:"id"`
	SandboxID string  `json:"sandbox_id"`
	ExpiresAt *string `json:"expires_at"`
}

func (c *Client) runtimePath(org, ws, rest string) string {
	return "/api/v1/org/" + url.PathEscape(org) + "/ws/" + url.PathEscape(ws) + "/runtimes" + rest
}

// CreateRuntime creates an idle runtime.
func (c *Client) CreateRuntime(ctx context.Context, org, ws string, in RuntimeCreate, idempotencyKey string) (*Runtime, error) {
	var out Runtime
	err := c.do(ctx, request{method: http.MethodPost, path: c.runtimePath(org, ws, ""), body: in, out: &out, idempotencyKey: idempotencyKey})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRuntimes lists the runtimes of a workspace (all pages).
func (c *Client) ListRuntimes(ctx context.Context, org, ws string) ([]Runtime, error) {
	return listCursor[Runtime](ctx, c, c.runtimePath(org, ws, ""), url.Values{})
}

// GetRuntime returns a runtime.
func (c *Client) GetRuntime(ctx context.Context, org, ws, id string) (*Runtime, error) {
	var out Runtime
	if err := c.do(ctx, request{method: http.MethodGet, path: c.runtimePath(org, ws, "/"+url.PathEscape(id)), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRuntime kills the runtime's sandbox and deletes the runtime.
func (c *Client) DeleteRuntime(ctx context.Context, org, ws, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: c.runtimePath(org, ws, "/"+url.PathEscape(id))})
}

// StartRuntime provisions the runtime's sandbox (timeoutSec 0: the
// runtime's own); the answer carries the sandbox token once.
func (c *Client) StartRuntime(ctx context.Context, org, ws, id string, timeoutSec int64) (*Runtime, error) {
	body := map[string]any{}
	if timeoutSec > 0 {
		body["timeout_sec"] = timeoutSec
	}
	return c.runtimeAction(ctx, org, ws, id, "start", body)
}

// RuntimeAction runs pause, resume or reset on a runtime.
func (c *Client) RuntimeAction(ctx context.Context, org, ws, id, action string) (*Runtime, error) {
	return c.runtimeAction(ctx, org, ws, id, action, nil)
}

func (c *Client) runtimeAction(ctx context.Context, org, ws, id, action string, body any) (*Runtime, error) {
	var out Runtime
	if err := c.do(ctx, request{method: http.MethodPost, path: c.runtimePath(org, ws, "/"+url.PathEscape(id)+"/"+action), body: body, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// KeepaliveRuntime keeps the runtime's sandbox alive at least extendSec
// from now (0: the server's default).
func (c *Client) KeepaliveRuntime(ctx context.Context, org, ws, id string, extendSec int64) (*Keepalive, error) {
	body := map[string]any{}
	if extendSec > 0 {
		body["extend_seconds"] = extendSec
	}
	var out Keepalive
	if err := c.do(ctx, request{method: http.MethodPost, path: c.runtimePath(org, ws, "/"+url.PathEscape(id)+"/keepalive"), body: body, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
