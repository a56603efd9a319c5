package client

import (
	"context"
	"net/http"
	"net/url"
)

// Template is a template sandboxes can be created from.
type Template struct {
	TemplateID string `json:"templateID"`
	CPUCount   int64  `json:"cpuCount"`
	MemoryMB   int64  `json:"memoryMB"`
}

// GetTemplate returns a template (GET /templates/{templateID}); an unknown
// template is a 404 whose detail lists the available ones.
func (c *Client) GetTemplate(ctx context.Context, id string) (*Template, error) {
	var out Template
	if err := c.do(ctx, request{method: http.MethodGet, path: "/templates/" + url.PathEscape(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
