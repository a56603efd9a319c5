package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// EnvironmentStatusChange is the status long poll with ?since: the server
// holds the answer up to wait while the state is still since, so each
// intermediate state (building, provisioning) is seen as it is reached.
func (c *Client) EnvironmentStatusChange(ctx context.Context, org, ws, id, since string, wait time.Duration) (*Environment, error) {
	q := url.Values{}
	if s := int(wait / time.Second); s > 0 {
		q.Set("wait", strconv.Itoa(s))
		if since != "" {
			q.Set("since", since)
		}
	}
	var out Environment
	if err := c.do(ctx, request{method: http.MethodGet, path: c.envPath(org, ws, "/"+url.PathEscape(id)+"/status"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
