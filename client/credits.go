package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// Balance is GET /api/v1/org/{org}/credits (API §5); amounts keep the
// server's decimal text.
type Balance struct {
	Organization      string      `json:"organization"`
	Balance           json.Number `json:"balance"`
	RunningCredits    json.Number `json:"running_credits"`
	EstimatedBalance  json.Number `json:"estimated_balance"`
	BurnRatePerSecond float64     `json:"burn_rate_per_second"`
	RunningSandboxes  int64       `json:"running_sandboxes"`
	Rates             struct {
		CPUSecond     float64 `json:"cpu_second"`
		GiBSecond     float64 `json:"gib_second"`
		SandboxSecond float64 `json:"sandbox_second"`
	} `json:"rates"`
}

// Credits returns the org's credit balance. It also proves that the key
// belongs to org: another org's path answers 404.
func (c *Client) Credits(ctx context.Context, org string) (*Balance, error) {
	var out Balance
	if err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/org/" + url.PathEscape(org) + "/credits", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
