package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/go-resty/resty/v2"
)

// stream sends one request whose body and answer are not JSON documents
// held in memory (file contents, NDJSON event streams). It is never retried:
// a body reader cannot be replayed. A 2xx answer's body is the caller's to
// close; any other answer becomes an *APIError.
func (c *Client) stream(ctx context.Context, method, path string, query url.Values, headers map[string]string, body any) (*http.Response, error) {
	req := c.r.R().SetContext(ctx).SetDoNotParseResponse(true)
	if query != nil {
		req.SetQueryParamsFromValues(query)
	}
	for k, v := range headers {
		req.SetHeader(k, v)
	}
	if body != nil {
		req.SetBody(body)
	}
	// A fresh request has no retry conditions, but the client's retry count
	// applies to connection errors; a streamed body must go out once.
	req.AddRetryCondition(func(*resty.Response, error) bool { return false })
	resp, err := req.Execute(method, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	raw := resp.RawResponse
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		defer raw.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
		return nil, newAPIError(method, path, raw.StatusCode, b)
	}
	return raw, nil
}
