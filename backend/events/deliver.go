package events

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Delivery defaults (DeliveryConfig's zero fields).
const (
	DefaultBackoffMax = time.Hour
	DefaultGiveUp     = 24 * time.Hour
	// DefaultClaimHold is how long a replica holds the deliveries it
	// claimed: a replica that died mid-delivery has its claims taken over
	// this long after it claimed them.
	DefaultClaimHold = 3 * deliveryTimeout
	backoffBase      = time.Second
	deliveryTimeout  = 10 * time.Second
	// claimBatch is the deliveries sent per pass: at 32 a pass's fixed
	// costs (fan-out, claim, the wait for its slowest attempt) held the
	// dispatcher to ~330 deliveries/s; 256 keeps 1,000 events/s under
	// 500 ms p99 lag (make bench, part events).
	claimBatch = 256
	// maxInFlight bounds the attempts under way at once on a replica, all
	// orgs together.
	maxInFlight = 4096
	// DefaultInFlightPerOrg bounds one org's attempts under way at once:
	// an org whose receiver is slow (each attempt waiting out its
	// timeout) holds at most these, and every other org's deliveries go
	// on beside them. A claim's batch: an org with fast receivers is
	// served as fast as before the bound.
	DefaultInFlightPerOrg = claimBatch
	// DefaultMaxPerOrg is how many webhooks an org may have
	// (DREADNODE_WEBHOOK_MAX_PER_ORG).
	DefaultMaxPerOrg = 100
)

// DeliveryConfig configures webhook deliveries.
type DeliveryConfig struct {
	// AllowPrivate lets webhooks target loopback and private addresses
	// (DREADNODE_WEBHOOK_ALLOW_PRIVATE=true).
	AllowPrivate bool
	// BackoffBase (default 1 s) doubles after each failed attempt up to
	// BackoffMax (DREADNODE_WEBHOOK_BACKOFF_MAX, default 1 h).
	BackoffBase, BackoffMax time.Duration
	// GiveUp (DREADNODE_WEBHOOK_GIVE_UP, default 24 h): a delivery still
	// failing this long after it was made fails, and disables its webhook.
	GiveUp time.Duration
	// Poll bounds the wait between passes without a wake-up (default 1 s).
	Poll time.Duration
	// ClaimHold (DREADNODE_WEBHOOK_CLAIM_HOLD, default 30 s) is how long a
	// claim on a delivery lasts; an attempt is cut off at a third of it
	// (at most 10 s), so a live claimer always finishes before its claim
	// lapses, and a dead one's deliveries are sent again by another
	// replica once it has.
	ClaimHold time.Duration
	// MaxPerOrg (DREADNODE_WEBHOOK_MAX_PER_ORG, default 100) is how many
	// webhooks an org may have; a create past it is refused (409).
	MaxPerOrg int
	// InFlightPerOrg (default DefaultInFlightPerOrg) bounds an org's
	// attempts under way at once on a replica.
	InFlightPerOrg int
}

func (c *DeliveryConfig) defaults() {
	if c.BackoffBase <= 0 {
		c.BackoffBase = backoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.GiveUp <= 0 {
		c.GiveUp = DefaultGiveUp
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.ClaimHold <= 0 {
		c.ClaimHold = DefaultClaimHold
	}
	if c.MaxPerOrg <= 0 {
		c.MaxPerOrg = DefaultMaxPerOrg
	}
	if c.InFlightPerOrg <= 0 {
		c.InFlightPerOrg = DefaultInFlightPerOrg
	}
}

// attemptTimeout bounds one attempt: well inside the claim.
func (c *DeliveryConfig) attemptTimeout() time.Duration { return min(deliveryTimeout, c.ClaimHold/3) }

// dispatcher turns events into webhook deliveries and sends them. Every
// replica runs one; the store's fan-out position and claims keep each
// delivery to one replica at a time. A pass starts its attempts and waits
// for them at most passWait: an attempt that waits out its timeout on a
// slow receiver holds only itself, never the next pass and so never
// another org's deliveries. Outcomes are recorded together at the start
// of the next pass (flush); an org has at most InFlightPerOrg attempts
// under way, and the claims skip its webhooks while it does.
type dispatcher struct {
	db     *store.DB
	cfg    DeliveryConfig
	log    *slog.Logger
	now    func() time.Time
	owner  string
	client *http.Client

	attempts sync.WaitGroup
	kick     chan struct{} // an attempt finished: record it, claim again
	mu       sync.Mutex
	inFlight map[string]int // by org: attempts started and not yet finished
	total    int
	done     []finished // attempts finished, not yet recorded
}

// finished is an attempt made and the org it counts for.
type finished struct {
	store.Finished
	org string
}

func newDispatcher(db *store.DB, cfg DeliveryConfig, log *slog.Logger, now func() time.Time) *dispatcher {
	cfg.defaults()
	dialer := &net.Dialer{Timeout: cfg.attemptTimeout(), Control: dialControl(cfg.AllowPrivate)}
	return &dispatcher{db: db, cfg: cfg, log: log, now: now, owner: "dispatcher-" + randomHex(8),
		kick: make(chan struct{}, 1), inFlight: map[string]int{},
		client: &http.Client{
			Timeout:   cfg.attemptTimeout(),
			Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConnsPerHost: 4},
			// A redirect could lead anywhere: it counts as a failed attempt.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// deliver makes one attempt of dl to wh and returns its outcome, for the
// delivery and for the attempt log.
func (d *dispatcher) deliver(ctx context.Context, wh *store.Webhook, dl *store.Delivery) store.DeliveryResult {
	started := d.now()
	at := d.post(ctx, wh, dl)
	res := store.DeliveryResult{AttemptID: "att_" + randomHex(12), Started: started, URL: wh.URL,
		Status: at.status, ErrorClass: at.class, ResponseBody: at.answer}
	res.At = d.now()
	res.Duration = res.At.Sub(started)
	if at.err != nil {
		res.Error = at.err.Error()
		if res.At.Sub(dl.CreatedAt) >= d.cfg.GiveUp {
			res.DisableReason = fmt.Sprintf("disabled at %s: delivery %s of event %s kept failing for %s (last: %s); fix the receiver, then PATCH enabled=true and redeliver",
				res.At.Format(time.RFC3339), dl.ID, dl.EventID, d.cfg.GiveUp, res.Error)
		} else {
			res.Retry = res.At.Add(d.backoff(dl.Attempts))
		}
	}
	return res
}

// backoff is the wait after the attempts-th failed attempt (0-based):
// BackoffBase doubling, capped at BackoffMax.
func (d *dispatcher) backoff(attempts int) time.Duration {
	w := d.cfg.BackoffBase
	for i := 0; i < attempts && w < d.cfg.BackoffMax; i++ {
		w *= 2
	}
	return min(w, d.cfg.BackoffMax)
}

// attempt is what one POST came to.
type attempt struct {
	status int    // the receiver's HTTP status (0: no answer)
	err    error  // nil: a 2xx
	class  string // E2B's errorClass of err
	answer string // the start of the receiver's answer
}

// Error classes (E2B's errorClass).
const (
	classHTTP      = "http_error"
	classDNS       = "dns_error"
	classTimeout   = "timeout"
	classTransport = "transport_error"
	classRequest   = "request_error"
	classCanceled  = "canceled"
)

// answerKept is how much of a receiver's answer the attempt log keeps.
const answerKept = 1 << 10

// post sends dl's body with E2B's headers; a 2xx is success.
func (d *dispatcher) post(ctx context.Context, wh *store.Webhook, dl *store.Delivery) attempt {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.attemptTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(dl.Body))
	if err != nil {
		return attempt{err: err, class: classRequest}
	}
	ts := d.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "dreadnode-webhooks/1")
	req.Header.Set("e2b-webhook-id", wh.ID)
	req.Header.Set("e2b-delivery-id", dl.ID)
	req.Header.Set("e2b-signature-version", "v1")
	req.Header.Set("e2b-signature", Signature(wh.Secret, dl.Body))
	req.Header.Set("webhook-id", dl.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", TimestampSignature(wh.Secret, dl.ID, ts, dl.Body))
	resp, err := d.client.Do(req)
	if err != nil {
		return attempt{err: fmt.Errorf("no answer: %v", err), class: errorClass(ctx, err)}
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, answerKept))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	// Kept as text: valid UTF-8 without NUL (PostgreSQL's text refuses it).
	a := attempt{status: resp.StatusCode, answer: strings.ReplaceAll(strings.ToValidUTF8(string(head), "\ufffd"), "\x00", "")}
	if resp.StatusCode/100 != 2 {
		a.err, a.class = fmt.Errorf("the receiver answered %d", resp.StatusCode), classHTTP
	}
	return a
}

// errorClass classes a failed request as E2B does.
func errorClass(ctx context.Context, err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return classDNS
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return classTimeout
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return classCanceled
	}
	return classTransport
}
