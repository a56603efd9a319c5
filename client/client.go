// Package client is the HTTP client the Terraform provider uses to talk to the
// Dreadnode API (see ../shared/API.md). It adds authentication, a User-Agent,
// timeouts, retries with backoff for idempotent calls, and turns the API's
// error envelope into *APIError values whose Error() carries the server's
// detail, so every Terraform diagnostic shows what the server said.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// Defaults of Config.
const (
	DefaultTimeout      = 60 * time.Second
	DefaultRetryMax     = 5
	DefaultRetryWaitMin = 500 * time.Millisecond
	DefaultRetryWaitMax = 10 * time.Second
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root, e.g. http://127.0.0.1:8080.
	BaseURL string
	// APIKey is sent as X-API-Key.
	APIKey string
	// UserAgent is sent as User-Agent (terraform-provider-dreadnode/<version>).
	UserAgent string
	// Timeout bounds one HTTP attempt (0: DefaultTimeout).
	Timeout time.Duration
	// RetryMax is the number of retries after the first attempt (0: DefaultRetryMax; <0: none).
	RetryMax int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between attempts.
	RetryWaitMin, RetryWaitMax time.Duration
	// HTTPClient replaces the underlying http.Client (tests).
	HTTPClient *http.Client
}

// Client talks to the Dreadnode API. It is safe for concurrent use.
type Client struct {
	r       *resty.Client
	baseURL string
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.BaseURL) == "" {
		return nil, errors.New("the API URL is empty")
	}
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("the API URL %q is not a URL: %w", cfg.BaseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("the API URL %q must be an absolute http:// or https:// URL", cfg.BaseURL)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.RetryMax == 0:
		cfg.RetryMax = DefaultRetryMax
	case cfg.RetryMax < 0:
		cfg.RetryMax = 0
	}
	if cfg.RetryWaitMin == 0 {
		cfg.RetryWaitMin = DefaultRetryWaitMin
	}
	if cfg.RetryWaitMax == 0 {
		cfg.RetryWaitMax = DefaultRetryWaitMax
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "terraform-provider-dreadnode/dev"
	}

	var r *resty.Client
	if cfg.HTTPClient != nil {
		r = resty.NewWithClient(cfg.HTTPClient)
	} else {
		r = resty.New()
	}
	r.SetBaseURL(u.String()).
		SetTimeout(cfg.Timeout).
		SetHeader("User-Agent", cfg.UserAgent).
		SetHeader("Accept", "application/json").
		SetRetryCount(cfg.RetryMax).
		SetRetryWaitTime(cfg.RetryWaitMin).
		SetRetryMaxWaitTime(cfg.RetryWaitMax).
		SetRetryAfter(retryAfter).
		SetLogger(discardLogger{}).
		AddRetryHook(func(resp *resty.Response, err error) {
			if resp == nil || resp.Request == nil {
				return
			}
			req := resp.Request
			fields := map[string]any{"method": req.Method, "url": req.URL, "attempt": req.Attempt}
			if err != nil {
				fields["error"] = err.Error()
			} else {
				fields["status"] = resp.StatusCode()
			}
			tflog.Debug(req.Context(), "retrying Dreadnode API request", fields)
		})
	if cfg.APIKey != "" {
		r.SetHeader("X-API-Key", cfg.APIKey)
	}
	return &Client{r: r, baseURL: u.String()}, nil
}

// BaseURL returns the API root the client talks to.
func (c *Client) BaseURL() string { return c.baseURL }

// NewIdempotencyKey returns a fresh key for one create call; reuse it across
// the retries of that call so the server answers them with the first result.
func NewIdempotencyKey() string { return "tf-" + uuid.NewString() }

// request describes one API call.
type request struct {
	method         string
	path           string
	query          url.Values
	body           any
	out            any
	idempotencyKey string
	headers        map[string]string
	// respHeader, when set, receives the response headers.
	respHeader *http.Header
}

// idempotent reports whether repeating the request has no further effect, so
// that it may be retried after a 5xx or a connection error.
func (q *request) idempotent() bool {
	switch q.method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return q.idempotencyKey != ""
}

func (c *Client) do(ctx context.Context, q request) error {
	req := c.r.R().SetContext(ctx)
	if q.query != nil {
		req.SetQueryParamsFromValues(q.query)
	}
	if q.body != nil {
		req.SetHeader("Content-Type", "application/json").SetBody(q.body)
	}
	if q.idempotencyKey != "" {
		req.SetHeader("Idempotency-Key", q.idempotencyKey)
	}
	for k, v := range q.headers {
		req.SetHeader(k, v)
	}
	idempotent := q.idempotent()
	req.AddRetryCondition(func(resp *resty.Response, err error) bool {
		return shouldRetry(ctx, idempotent, resp, err)
	})
	// Decode ourselves: resty's automatic unmarshalling depends on the
	// response's Content-Type, and error bodies must become *APIError.
	req.SetDoNotParseResponse(false)

	tflog.Trace(ctx, "Dreadnode API request", map[string]any{"method": q.method, "path": q.path})
	resp, err := req.Execute(q.method, q.path)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", q.method, q.path, ctx.Err())
		}
		return fmt.Errorf("%s %s: %w", q.method, q.path, err)
	}
	body := resp.Body()
	if q.respHeader != nil {
		*q.respHeader = resp.Header()
	}
	tflog.Trace(ctx, "Dreadnode API response", map[string]any{"method": q.method, "path": q.path, "status": resp.StatusCode()})
	if resp.StatusCode() < 200 || resp.StatusCode() > 299 {
		return newAPIError(q.method, q.path, resp.StatusCode(), body)
	}
	if raw, ok := q.out.(*[]byte); ok { // a download, not JSON
		*raw = body
		return nil
	}
	if q.out != nil && len(body) > 0 && resp.StatusCode() != http.StatusNoContent {
		if err := json.Unmarshal(body, q.out); err != nil {
			return fmt.Errorf("%s %s: decoding the response (HTTP %d): %w", q.method, q.path, resp.StatusCode(), err)
		}
	}
	return nil
}

// shouldRetry: 429 always (the server did not act on the request); 5xx and
// connection errors only for idempotent requests.
func shouldRetry(ctx context.Context, idempotent bool, resp *resty.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// A timed out attempt of an idempotent request may be retried;
			// the caller's own deadline was checked above.
			var ne net.Error
			return idempotent && errors.As(err, &ne) && ne.Timeout()
		}
		return idempotent
	}
	if resp == nil {
		return false
	}
	switch code := resp.StatusCode(); {
	case code == http.StatusTooManyRequests:
		return true
	case code == http.StatusNotImplemented || code == http.StatusHTTPVersionNotSupported:
		return false
	case code >= 500:
		return idempotent
	}
	return false
}

// retryAfter honours a Retry-After header given in seconds (0: the default backoff).
func retryAfter(_ *resty.Client, resp *resty.Response) (time.Duration, error) {
	if resp == nil {
		return 0, nil
	}
	if s := resp.Header().Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			return time.Duration(n) * time.Second, nil
		}
	}
	return 0, nil
}

type discardLogger struct{}

func (discardLogger) Errorf(string, ...any) {}
func (discardLogger) Warnf(string, ...any)  {}
func (discardLogger) Debugf(string, ...any) {}
