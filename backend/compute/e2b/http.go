package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/go-resty/resty/v2"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// call is one logical request to E2B (control plane or envd), retried on
// transient failures by do.
type call struct {
	op        string // provider operation, for error messages: "create", "pause", ...
	method    string
	path      string // control plane: a path under APIURL; envd: a full URL
	sandboxID string // for messages; "" when the call is not about one sandbox
	query     url.Values
	header    map[string]string
	body      any                  // JSON body; nil for none
	prepare   func(*resty.Request) // sets a non-JSON body (multipart)
	ok        []int                // success statuses
	out       any                  // JSON decode target for a success body; nil to skip
	envd      bool                 // a call to envd (other client, other error meanings)
	once      bool                 // never retry (Ping)
	// mapStatus may classify a non-success status itself; returning nil falls
	// back to the default mapping.
	mapStatus func(status int, e apiError) *compute.Error
	// beforeRetry runs before every retry with the failure that caused it. It
	// may end the call with a result (done) or an error (e.g. create adopting
	// an instance that was made although the answer was lost).
	beforeRetry func(ctx context.Context, cause error) (done bool, err error)
}

// response is what a successful call returns.
type response struct {
	status int
	header http.Header
	body   []byte
}

// apiError is E2B's error body: openapi.yml components.schemas.Error (code,
// message, error_code) and envd.yaml's Error (code, message).
type apiError struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code,omitempty"`
}

func parseAPIError(status int, body []byte) apiError {
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || (e.Message == "" && e.ErrorCode == "") {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 300 {
			e.Message = e.Message[:300] + "..."
		}
	}
	if e.Code == 0 {
		e.Code = status
	}
	return e
}

func (e apiError) detail() string {
	s := strings.TrimSpace(e.Message)
	if e.ErrorCode != "" {
		if s == "" {
			return e.ErrorCode
		}
		return e.ErrorCode + ": " + s
	}
	if s == "" {
		return "no details"
	}
	return s
}

// transientError is a failure worth retrying; cause is a sentence naming it.
type transientError struct {
	cause      string
	retryAfter time.Duration
	status     int // 0 for a transport error
	err        error
}

func (e *transientError) Error() string { return e.cause }
func (e *transientError) Unwrap() error { return e.err }

// AtCapacity reports E2B's concurrency limit (429): the backend queues the
// create again instead of failing it (see compute.AtCapacity).
func (e *transientError) AtCapacity() bool { return e.status == http.StatusTooManyRequests }

// ambiguous reports whether the request may have been applied although no
// success answer arrived (the connection dropped, a gateway gave up).
func (e *transientError) ambiguous() bool {
	return e.status == 0 || e.status == http.StatusBadGateway || e.status == http.StatusGatewayTimeout
}

// do sends c, retrying transient failures within p.cfg.Retry's bounds
// (backoff.Retry runs the loop; retryDelays is the policy).
func (p *Provider) do(ctx context.Context, c *call) (*response, error) {
	rc := p.cfg.Retry
	start := time.Now()
	delays := &retryDelays{rc: rc}
	attempt := 0
	var last *transientError // the failure being retried; nil once the outcome is final
	res, err := backoff.Retry(ctx, func() (*response, error) {
		attempt++
		last = nil
		if attempt > 1 && c.beforeRetry != nil {
			done, err := c.beforeRetry(ctx, delays.cause)
			if err != nil || done {
				return nil, backoff.Permanent(err) // done: nil, nil
			}
		}
		res, err := p.attempt(ctx, c)
		var te *transientError
		switch {
		case err == nil:
			return res, nil
		case !errors.As(err, &te):
			return nil, backoff.Permanent(err)
		case ctx.Err() != nil:
			return nil, backoff.Permanent(p.ctxError(c, ctx.Err()))
		case c.once:
			return nil, backoff.Permanent(unavailable(c, te, attempt, time.Since(start)))
		}
		last, delays.cause, delays.retryAfter = te, te, te.retryAfter
		return nil, te
	}, backoff.WithBackOff(delays), backoff.WithMaxTries(uint(rc.MaxAttempts)), backoff.WithMaxElapsedTime(rc.MaxElapsed))
	var pe *backoff.PermanentError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &pe): // the last attempt's final outcome (Retry returns it wrapped)
		return nil, pe.Err
	case last != nil && ctx.Err() == nil: // out of attempts or time
		return nil, unavailable(c, last, attempt, time.Since(start))
	case ctx.Err() != nil && last != nil: // ended while waiting to retry
		return nil, p.ctxError(c, ctx.Err())
	}
	return nil, err
}

// retryDelays is exponential with equal jitter (half fixed, half random):
// BaseDelay doubling up to MaxDelay, or a longer Retry-After (capped at
// MaxDelay) when the failure asked for one.
type retryDelays struct {
	rc         RetryConfig
	n          int
	cause      *transientError // the failure retried next
	retryAfter time.Duration
}

func (b *retryDelays) Reset() { b.n = 0 }

func (b *retryDelays) NextBackOff() time.Duration {
	b.n++
	d := b.rc.BaseDelay
	for i := 1; i < b.n && d < b.rc.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, b.rc.MaxDelay)
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	if b.retryAfter > d {
		d = min(b.retryAfter, b.rc.MaxDelay)
	}
	return d
}

// attempt sends the request once; a transient failure comes back as
// *transientError, a final one as *compute.Error.
func (p *Provider) attempt(ctx context.Context, c *call) (*response, error) {
	actx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	client := p.api
	if c.envd {
		client = p.envd
	}
	req := client.R().SetContext(actx)
	if c.query != nil {
		req.SetQueryParamsFromValues(c.query)
	}
	for k, v := range c.header {
		req.SetHeader(k, v)
	}
	if c.body != nil {
		req.SetHeader("Content-Type", "application/json").SetBody(c.body)
	}
	if c.prepare != nil {
		c.prepare(req)
	}
	resp, err := req.Execute(c.method, c.path)
	if errors.Is(err, resty.ErrResponseBodyTooLarge) {
		return nil, compute.Errorf(compute.KindInternal, c.op, err, "%s sent a body over the %d-byte bound", p.who(c), compute.MaxFileBytes)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, p.ctxError(c, ctx.Err())
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &transientError{cause: fmt.Sprintf("%s did not answer within %s", p.who(c), p.cfg.RequestTimeout), err: err}
		}
		return nil, &transientError{cause: fmt.Sprintf("cannot reach %s: %s", p.who(c), transportCause(err)), err: err}
	}
	status := resp.StatusCode()
	body := resp.Body()
	for _, s := range c.ok {
		if status == s {
			if c.out != nil && len(body) > 0 {
				if err := json.Unmarshal(body, c.out); err != nil {
					return nil, compute.Errorf(compute.KindInternal, c.op, err,
						"%s answered %d with a body that is not the documented JSON: %v", p.who(c), status, err)
				}
			}
			return &response{status: status, header: resp.Header(), body: body}, nil
		}
	}
	e := parseAPIError(status, body)
	if c.mapStatus != nil {
		if perr := c.mapStatus(status, e); perr != nil {
			return nil, perr
		}
	}
	return nil, p.mapStatus(c, status, e, resp.Header())
}

func (p *Provider) who(c *call) string {
	if c.envd {
		return "envd in sandbox " + c.sandboxID
	}
	return "the E2B API (" + p.apiURL + ")"
}

func transportCause(err error) string {
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out: " + err.Error()
	}
	return err.Error()
}

func (p *Provider) ctxError(c *call, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return compute.Errorf(compute.KindTimeout, c.op, err, "%s did not finish before its deadline", describe(c))
	}
	return compute.Errorf(compute.KindInternal, c.op, err, "%s was cancelled", describe(c))
}

func describe(c *call) string {
	if c.sandboxID != "" {
		return fmt.Sprintf("%s of E2B sandbox %s", c.op, c.sandboxID)
	}
	return "E2B " + c.op
}

func unavailable(c *call, te *transientError, attempts int, elapsed time.Duration) error {
	tries := "1 attempt"
	if attempts != 1 {
		tries = fmt.Sprintf("%d attempts", attempts)
	}
	return compute.Errorf(compute.KindUnavailable, c.op, te,
		"%s; gave up after %s in %s", te.cause, tries, elapsed.Round(time.Millisecond))
}

// mapStatus turns a documented (or commonly seen) E2B status into a
// compute.Error, or a *transientError for the retryable ones.
func (p *Provider) mapStatus(c *call, status int, e apiError, h http.Header) error {
	d := e.detail()
	subject := "the sandbox"
	if c.sandboxID != "" {
		subject = "sandbox " + c.sandboxID
	}
	switch status {
	case http.StatusTooManyRequests:
		return &transientError{status: status, retryAfter: retryAfter(h),
			cause: fmt.Sprintf("E2B is rate limiting this API key or its team reached its concurrent-sandbox limit (429 Too Many Requests: %s)", d)}
	case http.StatusServiceUnavailable:
		cause := fmt.Sprintf("E2B is unavailable (503 Service Unavailable: %s)", d)
		if e.ErrorCode == "sandbox_capacity_unavailable" {
			cause = fmt.Sprintf("E2B has no sandbox capacity right now (503 sandbox_capacity_unavailable: %s)", e.Message)
		}
		if c.envd {
			cause = fmt.Sprintf("envd in %s is unavailable (503: %s)", subject, d)
		}
		return &transientError{status: status, retryAfter: retryAfter(h), cause: cause}
	case http.StatusBadGateway:
		return &transientError{status: status, cause: fmt.Sprintf("%s answered 502 Bad Gateway (%s)", p.who(c), d)}
	case http.StatusGatewayTimeout:
		return &transientError{status: status, cause: fmt.Sprintf("%s answered 504 Gateway Timeout (%s)", p.who(c), d)}
	}
	if c.envd {
		switch status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return compute.Errorf(compute.KindAuth, c.op, nil,
				"envd in %s refused the request (%d: %s): the sandbox access token is stale or the user is unknown", subject, status, d)
		case http.StatusNotFound:
			return compute.Errorf(compute.KindNotFound, c.op, nil, "not found in %s: %s", subject, d)
		case http.StatusBadRequest:
			return compute.Errorf(compute.KindInvalid, c.op, nil, "envd in %s rejected the request: %s", subject, d)
		case http.StatusInsufficientStorage:
			return compute.Errorf(compute.KindResourceLimit, c.op, nil, "%s has no disk space left: %s", subject, d)
		}
		return compute.Errorf(compute.KindInternal, c.op, nil, "envd in %s answered %d: %s", subject, status, d)
	}
	switch status {
	case http.StatusBadRequest:
		return compute.Errorf(compute.KindInvalid, c.op, nil, "E2B rejected the request: %s", d)
	case http.StatusUnauthorized:
		return compute.Errorf(compute.KindAuth, c.op, nil,
			"E2B rejected the API key (401 Unauthorized: %s); check E2B_API_KEY", d)
	case http.StatusForbidden:
		return compute.Errorf(compute.KindAuth, c.op, nil,
			"E2B refused this operation for the API key (403 Forbidden: %s); check E2B_API_KEY and its team's permissions", d)
	case http.StatusNotFound, http.StatusGone:
		if c.sandboxID != "" {
			return compute.Errorf(compute.KindNotFound, c.op, nil,
				"E2B sandbox %s does not exist (it was killed or its timeout expired)", c.sandboxID)
		}
		return compute.Errorf(compute.KindNotFound, c.op, nil, "E2B answered 404: %s", d)
	case http.StatusConflict:
		return compute.Errorf(compute.KindConflict, c.op, nil, "%s is in the wrong state for %s: %s", subject, c.op, d)
	case http.StatusInternalServerError:
		return compute.Errorf(compute.KindInternal, c.op, nil, "E2B failed internally (500: %s)", d)
	}
	return compute.Errorf(compute.KindInternal, c.op, nil, "E2B answered an unexpected %d: %s", status, d)
}

func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}
