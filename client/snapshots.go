package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/go-resty/resty/v2"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Snapshot is a sandbox's filesystem committed to a template of the org
// (API.md §14 "Snapshots"): sandboxes start from its TemplateID (or its
// name, or SnapshotID) as their templateID.
type Snapshot = apitypes.Snapshot

// SnapshotCreate is the body of POST /sandboxes/{id}/snapshots.
type SnapshotCreate = apitypes.NewSnapshot

// SnapshotFilter selects snapshots in ListSnapshots: of one sandbox,
// and/or by name ("alias" or template id, either with ":tag").
type SnapshotFilter struct {
	SandboxID string
	Name      string
}

// CreateSnapshot commits the filesystem of a running or paused sandbox to
// a snapshot and answers once the snapshot is made (the sandbox is paused
// for the commit only). The commit of a large filesystem can outlast the
// client's per-attempt timeout, so this one call is bounded by ctx alone.
// It is not retried after a server error or a lost answer: a retry would
// be a second snapshot.
func (c *Client) CreateSnapshot(ctx context.Context, sandboxID string, in SnapshotCreate) (*Snapshot, error) {
	var out Snapshot
	q := request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(sandboxID) + "/snapshots", body: in, out: &out}
	if err := c.withoutAttemptTimeout().do(ctx, q); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSnapshots lists the org's snapshots, newest first, each template
// once (with the tag filtered on, else its newest build's).
func (c *Client) ListSnapshots(ctx context.Context, f SnapshotFilter) ([]Snapshot, error) {
	q := url.Values{}
	if f.SandboxID != "" {
		q.Set("sandboxID", f.SandboxID)
	}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	var out apitypes.SnapshotList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/snapshots", query: q, out: &out}); err != nil {
		return nil, err
	}
	if out.Items == nil {
		out.Items = []Snapshot{}
	}
	return out.Items, nil
}

// GetSnapshot returns the snapshot whose template id or name is ref (with
// ":tag", that tag's build; else the newest). There is no GET of one
// snapshot: it is looked up in the list, and a snapshot not listed (deleted,
// or never one of the org's) is a 404 *APIError, as a GET would answer.
func (c *Client) GetSnapshot(ctx context.Context, ref string) (*Snapshot, error) {
	list, err := c.ListSnapshots(ctx, SnapshotFilter{Name: ref})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, &APIError{Method: http.MethodGet, Path: "/snapshots?name=" + url.QueryEscape(ref), StatusCode: http.StatusNotFound,
			Envelope: apitypes.Error{Code: http.StatusNotFound, Type: "not_found",
				Detail: "snapshot " + ref + " not found: it was deleted, or it is not one of the org's snapshots"}}
	}
	return &list[0], nil
}

// DeleteSnapshot deletes a snapshot, every build of its template and their
// images (DELETE /templates/{templateID}); a deleted one is a 404.
func (c *Client) DeleteSnapshot(ctx context.Context, templateID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/templates/" + url.PathEscape(templateID)})
}

// withoutAttemptTimeout is a copy of c whose attempts have no timeout of
// their own: the caller's context bounds them.
func (c *Client) withoutAttemptTimeout() *Client {
	hc := *c.r.GetClient()
	hc.Timeout = 0
	r := resty.NewWithClient(&hc).
		SetBaseURL(c.baseURL).
		SetRetryCount(c.r.RetryCount).
		SetRetryWaitTime(c.r.RetryWaitTime).
		SetRetryMaxWaitTime(c.r.RetryMaxWaitTime).
		SetRetryAfter(retryAfter).
		SetLogger(discardLogger{})
	r.Header = c.r.Header.Clone()
	return &Client{r: r, baseURL: c.baseURL}
}
