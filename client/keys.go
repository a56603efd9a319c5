package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// APIKey is one of an org's API keys (API §11). Key (the secret) is set
// only in the answer of CreateAPIKey.
type APIKey = apitypes.APIKey

// APIKeyCreate is the body of CreateAPIKey.
type APIKeyCreate = apitypes.CreateAPIKey

// APIKeyCreateScope is a new key's scope: "full" or "read".
type APIKeyCreateScope = apitypes.CreateAPIKeyScope

func keysPath(org string) string { return "/api/v1/org/" + url.PathEscape(org) + "/keys" }

// CreateAPIKey makes a key for org; the answer carries its secret, shown
// this once.
func (c *Client) CreateAPIKey(ctx context.Context, org string, in APIKeyCreate) (*APIKey, error) {
	var out APIKey
	if err := c.do(ctx, request{method: http.MethodPost, path: keysPath(org), body: in, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAPIKeys lists org's keys that are not revoked.
func (c *Client) ListAPIKeys(ctx context.Context, org string) ([]APIKey, error) {
	var out []APIKey
	if err := c.do(ctx, request{method: http.MethodGet, path: keysPath(org), out: &out}); err != nil {
		return nil, err
	}
	return out, nil
}

// RevokeAPIKey revokes org's key id.
func (c *Client) RevokeAPIKey(ctx context.Context, org, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: keysPath(org) + "/" + url.PathEscape(id)})
}
