package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// LedgerEntry is a ledger record (API §2): the document's LedgerRecord;
// credits are exact (apitypes.CreditAmount, micro-credits).
type LedgerEntry = apitypes.LedgerRecord

// ListLedgerEntries lists the org's ledger records (all pages), filtered
// by ledger states (starting, running, paused, killed) and sandbox kinds
// (runtime, task, world) when given.
func (c *Client) ListLedgerEntries(ctx context.Context, org string, states, kinds []string) ([]LedgerEntry, error) {
	q := url.Values{}
	if len(states) > 0 {
		q.Set("state", strings.Join(states, ","))
	}
	if len(kinds) > 0 {
		q.Set("kind", strings.Join(kinds, ","))
	}
	return listCursor[LedgerEntry](ctx, c, "/api/v1/org/"+url.PathEscape(org)+"/sandboxes", q)
}

// GetLedgerEntry returns one ledger record.
func (c *Client) GetLedgerEntry(ctx context.Context, org, id string) (*LedgerEntry, error) {
	var out LedgerEntry
	if err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/org/" + url.PathEscape(org) + "/sandboxes/" + url.PathEscape(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// listCursor follows {"items", "next_cursor"} pages.
func listCursor[T any](ctx context.Context, c *Client, path string, q url.Values) ([]T, error) {
	all := []T{}
	cursor := ""
	for page := 0; page < 10000; page++ {
		q.Set("limit", "100")
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var out struct {
			Items      []T     `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, out: &out}); err != nil {
			return nil, err
		}
		all = append(all, out.Items...)
		if out.NextCursor == nil || *out.NextCursor == "" || *out.NextCursor == cursor {
			break
		}
		cursor = *out.NextCursor
	}
	return all, nil
}
