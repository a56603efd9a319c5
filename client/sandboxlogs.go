package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// SandboxLogs returns the startup and main-process output of a sandbox, one
// entry per line (GET /sandboxes/{id}/logs); deleted sandboxes keep theirs.
func (c *Client) SandboxLogs(ctx context.Context, id string) ([]string, error) {
	var out apitypes.SandboxLogs
	if err := c.do(ctx, request{method: http.MethodGet, path: "/sandboxes/" + url.PathEscape(id) + "/logs", out: &out}); err != nil {
		return nil, err
	}
	lines := make([]string, len(out.Logs))
	for i, l := range out.Logs {
		lines[i] = l.Line
	}
	return lines, nil
}
