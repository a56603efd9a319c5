package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// WorldJobCreate is the body of POST /worlds/jobs (API §16): NewWorldJob.
type WorldJobCreate = apitypes.NewWorldJob

// WorldJob is a Worlds job: a world record running one command to its end.
type WorldJob = apitypes.WorldJob

func (c *Client) worldJobPath(org, rest string) string {
	return "/api/v1/org/" + url.PathEscape(org) + "/worlds/jobs" + rest
}

// StartWorldJob starts a job; it returns at once (pending).
func (c *Client) StartWorldJob(ctx context.Context, org string, in WorldJobCreate, idempotencyKey string) (*WorldJob, error) {
	var out WorldJob
	if err := c.do(ctx, request{method: http.MethodPost, path: c.worldJobPath(org, ""), body: in, out: &out, idempotencyKey: idempotencyKey}); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWorldJob returns a job.
func (c *Client) GetWorldJob(ctx context.Context, org, id string) (*WorldJob, error) {
	var out WorldJob
	if err := c.do(ctx, request{method: http.MethodGet, path: c.worldJobPath(org, "/"+url.PathEscape(id)), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWorldJobs lists the org's jobs, newest first, at most limit of them.
func (c *Client) ListWorldJobs(ctx context.Context, org string, limit int) ([]WorldJob, error) {
	all := []WorldJob{}
	q := url.Values{}
	for len(all) < limit {
		q.Set("limit", strconv.Itoa(min(limit-len(all), 1000)))
		var page apitypes.WorldJobList
		if err := c.do(ctx, request{method: http.MethodGet, path: c.worldJobPath(org, ""), query: q, out: &page}); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextCursor == nil || len(page.Items) == 0 {
			break
		}
		q.Set("cursor", *page.NextCursor)
	}
	return all, nil
}

// StopWorldJob stops a job (it ends terminated).
func (c *Client) StopWorldJob(ctx context.Context, org, id string) (*WorldJob, error) {
	var out WorldJob
	if err := c.do(ctx, request{method: http.MethodDelete, path: c.worldJobPath(org, "/"+url.PathEscape(id)), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorldJobLogs returns the job's main-process output lines.
func (c *Client) WorldJobLogs(ctx context.Context, org, id string) ([]string, error) {
	var out apitypes.WorldJobLogs
	if err := c.do(ctx, request{method: http.MethodGet, path: c.worldJobPath(org, "/"+url.PathEscape(id)+"/logs"), out: &out}); err != nil {
		return nil, err
	}
	return out.Logs, nil
}

// WorldJobOutput downloads the tar of the job's output directory (after it
// ended); truncated says entries were left out past the server's bounds.
func (c *Client) WorldJobOutput(ctx context.Context, org, id string) (tar []byte, truncated bool, err error) {
	var hdr http.Header
	err = c.do(ctx, request{method: http.MethodGet, path: c.worldJobPath(org, "/"+url.PathEscape(id)+"/output"), out: &tar, respHeader: &hdr})
	return tar, hdr.Get("X-Output-Truncated") == "true", err
}
