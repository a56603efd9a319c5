package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// LedgerEntry is a ledger record (API §2) with every field the server
// shows; credits keep the server's decimal text.
type LedgerEntry struct {
	ID                    string            `json:"id"`
	SandboxKind           string            `json:"sandbox_kind"`
	Provider              string            `json:"provider"`
	ProviderSandboxID     *string           `json:"provider_sandbox_id"`
	State                 string            `json:"state"`
	KillReason            *string           `json:"kill_reason"`
	TemplateID            string            `json:"template_id"`
	CPUCount              int64             `json:"cpu_count"`
	MemoryMB              int64             `json:"memory_mb"`
	CreatedAt             string            `json:"created_at"`
	LastStartedAt         *string           `json:"last_started_at"`
	LastPausedAt          *string           `json:"last_paused_at"`
	KilledAt              *string           `json:"killed_at"`
	ExpiresAt             *string           `json:"expires_at"`
	Metadata              map[string]string `json:"metadata"`
	BilledCredits         json.Number       `json:"billed_credits"`
	RunningCredits        json.Number       `json:"running_credits"`
	EstimatedTotalCredits json.Number       `json:"estimated_total_credits"`
	CreditsPerSecond      float64           `json:"credits_per_second"`
	TotalRuntimeSeconds   float64           `json:"total_runtime_seconds"`
	SessionsCount         int64             `json:"sessions_count"`
	RuntimeID             string            `json:"runtime_id,omitempty"`
	EnvironmentID         string            `json:"environment_id,omitempty"`
	Diagnostic            string            `json:"diagnostic,omitempty"`
}

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
