package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Template is a template sandboxes can be created from (the document's).
type Template = apitypes.Template

// GetTemplate returns a template (GET /templates/{templateID}); an unknown
// template is a 404 whose detail lists the available ones.
func (c *Client) GetTemplate(ctx context.Context, id string) (*Template, error) {
	var out Template
	if err := c.do(ctx, request{method: http.MethodGet, path: "/templates/" + url.PathEscape(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
