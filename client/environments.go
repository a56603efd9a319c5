package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Task environment states: the document's TaskEnvironmentState enum
// (apitypes/openapi.yaml), as the strings Environment.State carries.
const (
	EnvBuilding     = string(apitypes.TaskEnvironmentStateBuilding)
	EnvProvisioning = string(apitypes.TaskEnvironmentStateProvisioning)
	EnvReady        = string(apitypes.TaskEnvironmentStateReady)
	EnvPaused       = string(apitypes.TaskEnvironmentStatePaused)
	EnvTornDown     = string(apitypes.TaskEnvironmentStateTornDown)
	EnvFailed       = string(apitypes.TaskEnvironmentStateFailed)
)

// EnvironmentCreate is the body of POST /environments.
type EnvironmentCreate = apitypes.CreateTaskEnvironment

// Environment is a task environment (POST answer, GET detail, status
// poll): the document's TaskEnvironment (the poll's TaskEnvironmentStatus is
// a subset of it; the fields it lacks stay zero), read leniently where
// servers have differed: the error is kept raw (an object on some servers)
// and service_urls also accepts the plain URL strings of older backends.
type Environment struct {
	apitypes.TaskEnvironment
	ServiceURLs Endpoints       `json:"service_urls"`
	Error       json.RawMessage `json:"error"`
}

// ErrorText renders the environment's error for a user.
func (e *Environment) ErrorText() string { return rawText(e.Error) }

func (c *Client) envPath(org, ws string, rest string) string {
	return "/api/v1/org/" + url.PathEscape(org) + "/ws/" + url.PathEscape(ws) + "/environments" + rest
}

// CreateEnvironment provisions a task environment; the answer (201, state
// building) is the only one carrying execute_token.
func (c *Client) CreateEnvironment(ctx context.Context, org, ws string, in EnvironmentCreate, idempotencyKey string) (*Environment, error) {
	var out Environment
	err := c.do(ctx, request{method: http.MethodPost, path: c.envPath(org, ws, ""), body: in, out: &out, idempotencyKey: idempotencyKey})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetEnvironment returns the full environment.
func (c *Client) GetEnvironment(ctx context.Context, org, ws, id string) (*Environment, error) {
	var out Environment
	if err := c.do(ctx, request{method: http.MethodGet, path: c.envPath(org, ws, "/"+url.PathEscape(id)), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// EnvironmentStatus is the cheap poll. wait > 0 asks the server to hold the
// answer up to that long until the state changes.
func (c *Client) EnvironmentStatus(ctx context.Context, org, ws, id string, wait time.Duration) (*Environment, error) {
	var out Environment
	var q url.Values
	if s := int(wait / time.Second); s > 0 {
		q = url.Values{"wait": {strconv.Itoa(s)}}
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: c.envPath(org, ws, "/"+url.PathEscape(id)+"/status"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseEnvironment pauses a ready environment.
func (c *Client) PauseEnvironment(ctx context.Context, org, ws, id string) error {
	return c.do(ctx, request{method: http.MethodPost, path: c.envPath(org, ws, "/"+url.PathEscape(id)+"/pause")})
}

// ResumeEnvironment resumes a paused environment.
func (c *Client) ResumeEnvironment(ctx context.Context, org, ws, id string) error {
	return c.do(ctx, request{method: http.MethodPost, path: c.envPath(org, ws, "/"+url.PathEscape(id)+"/resume")})
}

// DeleteEnvironment tears an environment down.
func (c *Client) DeleteEnvironment(ctx context.Context, org, ws, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: c.envPath(org, ws, "/"+url.PathEscape(id))})
}

// ListEnvironments lists the environments of a workspace, all pages; state
// filters when non-empty.
func (c *Client) ListEnvironments(ctx context.Context, org, ws, state string) ([]Environment, error) {
	var all []Environment
	for page := 1; page < 1000; page++ {
		q := url.Values{"page": {strconv.Itoa(page)}, "limit": {"100"}}
		if state != "" {
			q.Set("state", state)
		}
		var out struct {
			Environments []Environment `json:"environments"`
			HasNext      bool          `json:"has_next"`
		}
		if err := c.do(ctx, request{method: http.MethodGet, path: c.envPath(org, ws, ""), query: q, out: &out}); err != nil {
			return nil, err
		}
		all = append(all, out.Environments...)
		if !out.HasNext || len(out.Environments) == 0 {
			break
		}
	}
	return all, nil
}

// EnvironmentForkResult is one fork's outcome: the environment (with its
// execute token, in this answer only) or the error that kept it from being
// made.
type EnvironmentForkResult struct {
	Environment *Environment    `json:"environment"`
	Error       json.RawMessage `json:"error"`
}

// ErrorText renders the fork's error for a user ("" when it was made).
func (r *EnvironmentForkResult) ErrorText() string { return rawText(r.Error) }

// ForkEnvironment forks a ready or paused environment count times (API.md
// §14): one entry per fork, in order.
func (c *Client) ForkEnvironment(ctx context.Context, org, ws, id string, count int) ([]EnvironmentForkResult, error) {
	var out []EnvironmentForkResult
	err := c.do(ctx, request{method: http.MethodPost, path: c.envPath(org, ws, "/"+url.PathEscape(id)+"/fork"),
		body: apitypes.ForkTaskEnvironment{Count: &count}, out: &out})
	return out, err
}
