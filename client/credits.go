package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Balance is GET /api/v1/org/{org}/credits (API §5): the document's
// CreditBalance; amounts are exact (apitypes.CreditAmount).
type Balance = apitypes.CreditBalance

// Credits returns the org's credit balance. It also proves that the key
// belongs to org: another org's path answers 404.
func (c *Client) Credits(ctx context.Context, org string) (*Balance, error) {
	var out Balance
	if err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/org/" + url.PathEscape(org) + "/credits", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
