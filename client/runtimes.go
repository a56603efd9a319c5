package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// RuntimeResources are a runtime's sandbox resources (nil: template
// default): the document's RuntimeResources.
type RuntimeResources = apitypes.RuntimeResources

// RuntimeCreate is the body of POST /runtimes (API §4): CreateRuntime.
type RuntimeCreate = apitypes.CreateRuntime

// Runtime is a runtime of a workspace: idle, running or paused, with its
// current ledger record as Instance; SandboxToken only start returns.
type Runtime = apitypes.Runtime

// Keepalive is the answer of POST /runtimes/{id}/keepalive.
type Keepalive = apitypes.RuntimeKeepalive

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
	var body apitypes.StartRuntime
	if timeoutSec > 0 {
		n := int(timeoutSec)
		body.TimeoutSec = &n
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
	var body apitypes.RuntimeKeepaliveRequest
	if extendSec > 0 {
		n := int(extendSec)
		body.ExtendSeconds = &n
	}
	var out Keepalive
	if err := c.do(ctx, request{method: http.MethodPost, path: c.runtimePath(org, ws, "/"+url.PathEscape(id)+"/keepalive"), body: body, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
