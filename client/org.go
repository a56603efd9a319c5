package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Usage is GET /api/v1/org/{org}/sandboxes/usage: the document's Usage.
type Usage = apitypes.Usage

// SandboxUsage returns the org's aggregate sandbox usage.
func (c *Client) SandboxUsage(ctx context.Context, org string) (*Usage, error) {
	var out Usage
	if err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/org/" + url.PathEscape(org) + "/sandboxes/usage", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// LedgerRecord is a sandbox record of the ledger (API §2), the document's.
type LedgerRecord = apitypes.LedgerRecord

// ListLedger lists the org's ledger records in the given states (all pages).
func (c *Client) ListLedger(ctx context.Context, org string, states []string) ([]LedgerRecord, error) {
	q := url.Values{}
	if len(states) > 0 {
		q.Set("state", strings.Join(states, ","))
	}
	return listCursor[LedgerRecord](ctx, c, "/api/v1/org/"+url.PathEscape(org)+"/sandboxes", q)
}

// TaskInput is one declared input of a task.
type TaskInput = apitypes.TaskInput

// Task is a catalog entry (GET /api/v1/org/{org}/tasks): the document's
// Task, with its services read leniently into one map.
type Task struct {
	apitypes.Task
	// Services maps a service name to its exposed container port.
	Services map[string]int64 `json:"-"`
}

// UnmarshalJSON accepts services as a list of names, a map of name to port
// (also under "expose"), or a list of objects with a name and a port.
func (t *Task) UnmarshalJSON(b []byte) error {
	var aux struct {
		apitypes.Task
		Services json.RawMessage `json:"services"`
		Expose   json.RawMessage `json:"expose"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*t = Task{Task: aux.Task}
	t.Services = map[string]int64{}
	for _, raw := range []json.RawMessage{aux.Services, aux.Expose} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var m map[string]int64
		if err := json.Unmarshal(raw, &m); err == nil {
			for k, v := range m {
				t.Services[k] = v
			}
			continue
		}
		var names []string
		if err := json.Unmarshal(raw, &names); err == nil {
			for _, n := range names {
				if _, ok := t.Services[n]; !ok {
					t.Services[n] = 0
				}
			}
			continue
		}
		var objs []struct {
			Name string `json:"name"`
			Port int64  `json:"port"`
		}
		if err := json.Unmarshal(raw, &objs); err == nil {
			for _, o := range objs {
				t.Services[o.Name] = o.Port
			}
		}
	}
	return nil
}

// GetTask resolves a task reference ([org/]name[@version]; without a version
// the newest) with GET /api/v1/org/{org}/tasks/{ref}.
func (c *Client) GetTask(ctx context.Context, org, ref string) (*Task, error) {
	parts := strings.Split(ref, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	var out Task
	if err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/org/" + url.PathEscape(org) + "/tasks/" + strings.Join(parts, "/"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTasks returns the org's task catalog.
func (c *Client) ListTasks(ctx context.Context, org string) ([]Task, error) {
	var raw json.RawMessage
	if err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/org/" + url.PathEscape(org) + "/tasks", out: &raw}); err != nil {
		return nil, err
	}
	tasks, _, err := decodePage[Task](raw, "tasks", "items")
	return tasks, err
}
