package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// ReadSandboxFile copies the file at path (absolute) in a running sandbox
// to w (GET /sandboxes/{id}/files) and returns the bytes copied.
func (c *Client) ReadSandboxFile(ctx context.Context, id, accessToken, path string, w io.Writer) (int64, error) {
	p := "/sandboxes/" + url.PathEscape(id) + "/files"
	resp, err := c.stream(ctx, http.MethodGet, p, url.Values{"path": {path}},
		map[string]string{"X-Access-Token": accessToken, "Accept": "application/octet-stream"}, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("GET %s: reading %s: %w", p, path, err)
	}
	return n, nil
}

// WriteSandboxFile writes r to path (absolute) in a running sandbox
// (PUT /sandboxes/{id}/files), creating or replacing the file.
func (c *Client) WriteSandboxFile(ctx context.Context, id, accessToken, path string, r io.Reader) error {
	p := "/sandboxes/" + url.PathEscape(id) + "/files"
	resp, err := c.stream(ctx, http.MethodPut, p, url.Values{"path": {path}},
		map[string]string{"X-Access-Token": accessToken, "Content-Type": "application/octet-stream"}, r)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}
