package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Webhook is an org's subscription to its events (API §12).
type Webhook struct {
	ID             string
	OrgID          string
	Name           string
	URL            string
	Enabled        bool
	Events         []string // event types; empty = every type
	Secret         string   // signs deliveries; never shown after registration
	CreatedAt      time.Time
	DisabledReason string // why the backend disabled it (deliveries kept failing)
	FromSeq        int64  // the last event before its registration: it gets the later ones
}

const webhookColumns = `id, org_id, name, url, enabled, events, secret, created_at, disabled_reason, from_seq`

func scanWebhook(s Scanner) (*Webhook, error) {
	var w Webhook
	var enabled int
	var events string
	err := s.Scan(&w.ID, &w.OrgID, &w.Name, &w.URL, &enabled, &events, &w.Secret, nsTime(&w.CreatedAt), &w.DisabledReason, &w.FromSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	w.Enabled = enabled != 0
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return nil, fmt.Errorf("decoding webhook %s: %w", w.ID, err)
	}
	return &w, nil
}

// Wants reports whether w subscribes to events of type t.
func (w *Webhook) Wants(t string) bool { return len(w.Events) == 0 || slices.Contains(w.Events, t) }

// PutWebhook inserts w, or replaces the webhook of w's org with w's id. A
// new webhook gets the events written after its registration.
func (db *DB) PutWebhook(ctx context.Context, w *Webhook) error {
	events, _ := json.Marshal(nonNilSlice(w.Events))
	_, err := db.w.ExecContext(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,
		(SELECT COALESCE(MAX(seq), 0) FROM events))
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, url = excluded.url, enabled = excluded.enabled,
		events = excluded.events, secret = excluded.secret, disabled_reason = excluded.disabled_reason`,
		w.ID, w.OrgID, w.Name, w.URL, b2i(w.Enabled), string(events), w.Secret, w.CreatedAt.UnixNano(), w.DisabledReason)
	return err
}

// ErrWebhookLimit is AddWebhook's answer when the org already has max
// webhooks; Have is how many.
type ErrWebhookLimit struct{ Have int }

func (e *ErrWebhookLimit) Error() string {
	return fmt.Sprintf("the organization already has %d webhooks", e.Have)
}

// AddWebhook inserts a new webhook unless its org already has max: the
// count and the insert are one transaction, serialised per org (LockTx),
// so creates racing each other cannot pass the cap (a count read before
// a separate insert let two at once make max+1).
func (db *DB) AddWebhook(ctx context.Context, w *Webhook, max int) error {
	events, _ := json.Marshal(nonNilSlice(w.Events))
	return db.Tx(ctx, func(tx *sql.Tx) error {
		if err := LockTx(ctx, tx, "webhooks of", w.OrgID); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhooks WHERE org_id = ?`, w.OrgID).Scan(&have); err != nil {
			return err
		}
		if have >= max {
			return &ErrWebhookLimit{Have: have}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,
			(SELECT COALESCE(MAX(seq), 0) FROM events))`,
			w.ID, w.OrgID, w.Name, w.URL, b2i(w.Enabled), string(events), w.Secret, w.CreatedAt.UnixNano(), w.DisabledReason)
		return err
	})
}

// GetWebhook reads an org's webhook; another org's is ErrNotFound.
func (db *DB) GetWebhook(ctx context.Context, orgID, id string) (*Webhook, error) {
	return scanWebhook(db.r.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ? AND org_id = ?`, id, orgID))
}

// ListWebhooks lists an org's webhooks, oldest first.
func (db *DB) ListWebhooks(ctx context.Context, orgID string) ([]*Webhook, error) {
	return QueryAll(ctx, db.r, scanWebhook, `SELECT `+webhookColumns+` FROM webhooks WHERE org_id = ? ORDER BY created_at, id`, orgID)
}

// DeleteWebhook removes an org's webhook, its deliveries and their attempts.
func (db *DB) DeleteWebhook(ctx context.Context, orgID, id string) error {
	return db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND org_id = ?`, id, orgID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM webhook_attempts WHERE webhook_id = ?`, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = ?`, id)
		return err
	})
}

// Delivery is one event to send to one webhook; every attempt reuses its id.
type Delivery struct {
	ID          string
	WebhookID   string
	EventSeq    int64
	EventID     string
	EventType   string
	SandboxID   string
	Body        []byte
	Status      string // pending, delivered, failed
	Attempts    int
	CreatedAt   time.Time
	NextAt      time.Time
	LastStatus  int
	LastError   string
	DeliveredAt time.Time
}

// Delivery statuses (not phases, though two share a phase's name).
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

const deliveryColumns = `id, webhook_id, event_seq, event_id, event_type, sandbox_id, body, status, attempts, created_at, next_at,
	last_status, last_error, delivered_at`

func scanDelivery(s Scanner) (*Delivery, error) {
	var d Delivery
	var body string
	var delivered sql.NullInt64
	err := s.Scan(&d.ID, &d.WebhookID, &d.EventSeq, &d.EventID, &d.EventType, &d.SandboxID, &body, &d.Status, &d.Attempts,
		nsTime(&d.CreatedAt), nsTime(&d.NextAt), &d.LastStatus, &d.LastError, &delivered)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	d.Body, d.DeliveredAt = []byte(body), TimeFromNanos(delivered)
	return &d, err
}

// FanOut turns the events after the fan-out position into deliveries for
// every enabled webhook of their org that subscribes to their type, and
// advances the position, in one transaction conditional on the position
// read: of replicas racing, one wins and the others find nothing to do.
// render makes a delivery's body; newID its id. It returns how many events
// it consumed (0: nothing new).
//
// Without an enabled webhook it reads one small table and writes nothing;
// the position then jumps to the oldest webhook's registration (from_seq).
func (db *DB) FanOut(ctx context.Context, now time.Time, render func(*Event) []byte, newID func() string) (int, error) {
	hooks, err := QueryAll(ctx, db.r, scanWebhook, `SELECT `+webhookColumns+` FROM webhooks WHERE enabled = 1`)
	if err != nil || len(hooks) == 0 {
		return 0, err
	}
	var from int64
	if err := db.r.QueryRowContext(ctx, `SELECT seq FROM webhook_fanout WHERE id = 1`).Scan(&from); err != nil {
		return 0, err
	}
	oldest := hooks[0].FromSeq
	for _, h := range hooks {
		oldest = min(oldest, h.FromSeq)
	}
	evs, _, err := db.EventsAfter(ctx, max(from, oldest), 500, EventSettle, now)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_fanout SET seq = ? WHERE id = 1 AND seq = ?`, evs[len(evs)-1].Seq, from)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errFanOutRaced
		}
		// Inserted fanOutRows at a time: a round trip per delivery held
		// PostgreSQL's fan-out far below 1,000 events a second.
		var rows []string
		var args []any
		flush := func() error {
			if len(rows) == 0 {
				return nil
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, event_seq, event_id, event_type,
				sandbox_id, body, status, created_at, next_at) VALUES `+strings.Join(rows, ", ")+`
				ON CONFLICT (webhook_id, event_seq) DO NOTHING`, args...)
			rows, args = rows[:0], args[:0]
			return err
		}
		for _, e := range evs {
			var body string
			for _, h := range hooks {
				if h.OrgID != e.OrgID || e.Seq <= h.FromSeq || !h.Wants(e.Type) {
					continue
				}
				if body == "" {
					body = string(render(e))
				}
				rows = append(rows, `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
				args = append(args, newID(), h.ID, e.Seq, e.ID, e.Type, e.SandboxID, body, DeliveryPending, now.UnixNano(), now.UnixNano())
				if len(rows) == fanOutRows {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
		return flush()
	})
	if errors.Is(err, errFanOutRaced) {
		return 0, nil
	}
	return len(evs), err
}

var errFanOutRaced = errors.New("another replica fanned these events out")

// fanOutRows bounds the deliveries one fan-out statement inserts (10
// parameters each, well under both databases' limits).
const fanOutRows = 500

// ClaimDeliveries claims up to limit due deliveries of enabled webhooks
// for owner until now+hold: each the oldest pending one of its webhook
// and sandbox, so a sandbox's events are delivered in order. A claim whose
// holder died expires and is taken again (at least once). The webhooks of
// skipOrgs are passed over (the dispatcher has as many of their attempts
// under way as it lets an org have).
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now time.Time, hold time.Duration, limit int, skipOrgs ...string) ([]*Delivery, error) {
	skip := ""
	args := []any{DeliveryPending, now.UnixNano(), now.UnixNano()}
	if len(skipOrgs) > 0 {
		skip = ` AND w.org_id NOT IN (` + placeholders(len(skipOrgs)) + `)`
		for _, o := range skipOrgs {
			args = append(args, o)
		}
	}
	args = append(args, DeliveryPending, limit)
	ids, err := QueryStrings(ctx, db.r, `SELECT d.id FROM webhook_deliveries d
		WHERE d.status = ? AND d.next_at <= ? AND (d.claim_expires IS NULL OR d.claim_expires < ?)
		AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.enabled = 1`+skip+`)
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id AND e.sandbox_id = d.sandbox_id
			AND e.status = ? AND e.event_seq < d.event_seq)
		ORDER BY d.event_seq LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// One statement claims them all (a row another replica claimed since
	// the read is skipped by the WHERE): a round trip per row held the
	// dispatcher far below 1,000 deliveries a second on PostgreSQL.
	args = []any{owner, now.Add(hold).UnixNano(), DeliveryPending, now.UnixNano()}
	for _, id := range ids {
		args = append(args, id)
	}
	out, err := QueryAll(ctx, db.w, scanDelivery, `UPDATE webhook_deliveries SET claimed_by = ?, claim_expires = ?
		WHERE status = ? AND (claim_expires IS NULL OR claim_expires < ?) AND id IN (`+placeholders(len(ids))+`)
		RETURNING `+deliveryColumns, args...)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Delivery) int { return cmp.Compare(a.EventSeq, b.EventSeq) })
	return out, nil
}

// ReleaseClaims gives back owner's claims on ids unattempted: they are
// due again at once, for any replica.
func (db *DB) ReleaseClaims(ctx context.Context, owner string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{owner}
	for _, id := range ids {
		args = append(args, id)
	}
	_, err := db.w.ExecContext(ctx, `UPDATE webhook_deliveries SET claimed_by = NULL, claim_expires = NULL
		WHERE claimed_by = ? AND id IN (`+placeholders(len(ids))+`)`, args...)
	return err
}

// DeliveryResult is the outcome of one attempt.
type DeliveryResult struct {
	Status int    // the receiver's HTTP status (0: no answer)
	Error  string // why it failed ("" on success)
	At     time.Time
	// Retry is when to try again after a failure; zero gives up: the
	// delivery fails and its webhook is disabled with DisableReason.
	Retry         time.Time
	DisableReason string
	// The attempt's entry in the log (webhook_attempts): its id, when the
	// POST started and how long it took, the class of its error (E2B's
	// errorClass), the URL tried and the start of the answer.
	AttemptID    string
	Started      time.Time
	Duration     time.Duration
	ErrorClass   string
	URL          string
	ResponseBody string
}

// FinishDelivery records an attempt of d by owner (FinishDeliveries).
func (db *DB) FinishDelivery(ctx context.Context, d *Delivery, owner string, r DeliveryResult) error {
	return db.FinishDeliveries(ctx, owner, []Finished{{d, r}})
}

// Finished is an attempt made of a delivery and its outcome.
type Finished struct {
	Delivery *Delivery
	Result   DeliveryResult
}

// FinishDeliveries records attempts made by owner, in one transaction (a
// dispatcher's pass records its attempts together: a transaction per
// attempt held PostgreSQL's deliveries far below 1,000 a second). Every
// attempt goes to the log (it was made); a delivery's outcome is recorded
// only while owner still holds its claim (else the new holder's attempt
// counts).
func (db *DB) FinishDeliveries(ctx context.Context, owner string, fs []Finished) error {
	if len(fs) == 0 {
		return nil
	}
	return db.Tx(ctx, func(tx *sql.Tx) error {
		// The log, one statement for all. A webhook deleted meanwhile
		// leaves its rows behind, unread (the log joins its delivery)
		// until the retention sweep.
		var rows []string
		var args []any
		for _, f := range fs {
			d, r := f.Delivery, f.Result
			if r.AttemptID == "" {
				continue
			}
			started := r.Started
			if started.IsZero() {
				started = r.At.Add(-r.Duration)
			}
			rows = append(rows, `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
			args = append(args, r.AttemptID, d.ID, d.WebhookID, started.UnixNano(), int64(r.Duration), r.Status, r.Error, r.ErrorClass,
				r.URL, r.ResponseBody)
		}
		if len(rows) > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_attempts (id, delivery_id, webhook_id, at, duration_ns, status_code,
				error, error_class, url, response_body) VALUES `+strings.Join(rows, ", ")+` ON CONFLICT (id) DO NOTHING`, args...); err != nil {
				return err
			}
		}
		// The outcomes, one statement for all (a round trip per delivery
		// serialised the pass): each only while owner holds its claim.
		rows, args = rows[:0], args[:0]
		for _, f := range fs {
			d, r := f.Delivery, f.Result
			status, next, delivered := DeliveryPending, NanosOrNull(r.Retry), any(nil)
			switch {
			case r.Error == "":
				status, next, delivered = DeliveryDelivered, r.At.UnixNano(), r.At.UnixNano()
			case r.Retry.IsZero():
				status, next = DeliveryFailed, r.At.UnixNano()
			}
			rows = append(rows, `(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT))`)
			args = append(args, d.ID, status, next, r.Status, r.Error, delivered)
		}
		// VALUES' columns are column1… on both SQLite and PostgreSQL.
		updated, err := QueryAll(ctx, tx, func(s Scanner) ([2]string, error) {
			var v [2]string
			return v, s.Scan(&v[0], &v[1])
		}, `UPDATE webhook_deliveries SET status = v.column2, attempts = attempts + 1,
			next_at = v.column3, last_status = v.column4, last_error = v.column5, delivered_at = v.column6,
			claimed_by = NULL, claim_expires = NULL
			FROM (VALUES `+strings.Join(rows, ", ")+`) AS v
			WHERE webhook_deliveries.id = v.column1 AND webhook_deliveries.claimed_by = ?
			RETURNING webhook_deliveries.id, webhook_deliveries.status`, append(args, owner)...)
		if err != nil {
			return err
		}
		var failed []string
		for _, u := range updated {
			if u[1] == DeliveryFailed {
				failed = append(failed, u[0])
			}
		}
		// A delivery that failed for good disables its webhook, with why.
		for _, f := range fs {
			if slices.Contains(failed, f.Delivery.ID) {
				if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET enabled = 0, disabled_reason = ? WHERE id = ?`,
					f.Result.DisableReason, f.Delivery.WebhookID); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Attempt is one entry of a webhook's attempt log, with its delivery's
// event.
type Attempt struct {
	Seq          int64
	ID           string
	DeliveryID   string
	WebhookID    string
	At           time.Time // when the POST started
	Duration     time.Duration
	StatusCode   int // 0: no answer
	Error        string
	ErrorClass   string
	URL          string
	ResponseBody string
	// Of the delivery.
	EventID, EventType, SandboxID string
	Body                          []byte
}

// Success reports whether the attempt was answered 2xx.
func (a *Attempt) Success() bool { return a.Error == "" }

const attemptColumns = `a.seq, a.id, a.delivery_id, a.webhook_id, a.at, a.duration_ns, a.status_code, a.error, a.error_class, a.url,
	a.response_body, d.event_id, d.event_type, d.sandbox_id, d.body`

func scanAttempt(s Scanner) (*Attempt, error) {
	var a Attempt
	var dur int64
	var body string
	if err := s.Scan(&a.Seq, &a.ID, &a.DeliveryID, &a.WebhookID, nsTime(&a.At), &dur, &a.StatusCode, &a.Error, &a.ErrorClass, &a.URL,
		&a.ResponseBody, &a.EventID, &a.EventType, &a.SandboxID, &body); err != nil {
		return nil, err
	}
	a.Duration, a.Body = time.Duration(dur), []byte(body)
	return &a, nil
}

// AttemptsOf returns the attempts of the given deliveries of webhookID,
// oldest first.
func (db *DB) AttemptsOf(ctx context.Context, webhookID string, deliveryIDs []string) ([]*Attempt, error) {
	if len(deliveryIDs) == 0 {
		return nil, nil
	}
	args := []any{webhookID}
	for _, id := range deliveryIDs {
		args = append(args, id)
	}
	return QueryAll(ctx, db.r, scanAttempt, `SELECT `+attemptColumns+` FROM webhook_attempts a
		JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE a.webhook_id = ? AND a.delivery_id IN (`+placeholders(len(deliveryIDs))+`)
		ORDER BY a.seq`, args...)
}

// AttemptFilter selects a webhook's attempts.
type AttemptFilter struct {
	WebhookID  string
	Asc        bool      // oldest first (else newest first)
	Cursor     int64     // after this seq (in the order asked); 0: from the start
	Start, End time.Time // at in [Start, End) when set
	Success    *bool     // only successful (true) or failed (false) attempts
	Types      []string  // only these event types
	Limit      int
}

// ListAttempts lists a webhook's attempt log.
func (db *DB) ListAttempts(ctx context.Context, f AttemptFilter) ([]*Attempt, error) {
	q := `SELECT ` + attemptColumns + ` FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE a.webhook_id = ?`
	args := []any{f.WebhookID}
	order := ` ORDER BY a.seq DESC`
	if f.Asc {
		order = ` ORDER BY a.seq`
	}
	if f.Cursor > 0 {
		if f.Asc {
			q += ` AND a.seq > ?`
		} else {
			q += ` AND a.seq < ?`
		}
		args = append(args, f.Cursor)
	}
	if !f.Start.IsZero() {
		q += ` AND a.at >= ?`
		args = append(args, f.Start.UnixNano())
	}
	if !f.End.IsZero() {
		q += ` AND a.at < ?`
		args = append(args, f.End.UnixNano())
	}
	if f.Success != nil {
		if *f.Success {
			q += ` AND a.error = ''`
		} else {
			q += ` AND a.error <> ''`
		}
	}
	if len(f.Types) > 0 {
		q += ` AND d.event_type IN (` + placeholders(len(f.Types)) + `)`
		for _, t := range f.Types {
			args = append(args, t)
		}
	}
	q += order
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return QueryAll(ctx, db.r, scanAttempt, q, args...)
}

// ListDeliveries is a webhook's delivery log, newest first.
func (db *DB) ListDeliveries(ctx context.Context, webhookID string, limit int) ([]*Delivery, error) {
	return QueryAll(ctx, db.r, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE webhook_id = ?
		ORDER BY event_seq DESC LIMIT ?`, webhookID, limit)
}

// Redeliver makes a delivery of webhookID due again now (same id), with a
// fresh retry window.
func (db *DB) Redeliver(ctx context.Context, webhookID, id string, now time.Time) (*Delivery, error) {
	res, err := db.w.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, next_at = ?, created_at = ?,
		claimed_by = NULL, claim_expires = NULL WHERE id = ? AND webhook_id = ?`, DeliveryPending, now.UnixNano(), now.UnixNano(), id, webhookID)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, ErrNotFound
	}
	return scanDelivery(db.r.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`, id))
}

// GetWebhookByID reads a webhook whatever its org (the dispatcher's view).
func (db *DB) GetWebhookByID(ctx context.Context, id string) (*Webhook, error) {
	return scanWebhook(db.r.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, id))
}

// AttemptStat aggregates attempts: how many, how many failed, and their
// durations.
type AttemptStat struct {
	Start         time.Time // of the bucket
	Total, Failed int64
	Min, Avg, Max time.Duration
}

// AttemptStats aggregates a webhook's attempts made in [start, end), in all
// and per bucket (buckets without attempts are left out).
func (db *DB) AttemptStats(ctx context.Context, webhookID string, start, end time.Time, bucket time.Duration) (all AttemptStat, buckets []AttemptStat, err error) {
	const aggregates = `COUNT(*), COALESCE(SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END), 0), COALESCE(MIN(duration_ns), 0),
		COALESCE(CAST(AVG(duration_ns) AS DOUBLE PRECISION), 0), COALESCE(MAX(duration_ns), 0)`
	scan := func(s Scanner, b *AttemptStat, extra ...any) error {
		var minNs, maxNs int64
		var avg float64
		if err := s.Scan(append(extra, &b.Total, &b.Failed, &minNs, &avg, &maxNs)...); err != nil {
			return err
		}
		b.Min, b.Avg, b.Max = time.Duration(minNs), time.Duration(avg), time.Duration(maxNs)
		return nil
	}
	if err := scan(db.r.QueryRowContext(ctx, `SELECT `+aggregates+` FROM webhook_attempts WHERE webhook_id = ? AND at >= ? AND at < ?`,
		webhookID, start.UnixNano(), end.UnixNano()), &all); err != nil {
		return all, nil, err
	}
	all.Start = start
	buckets, err = QueryAll(ctx, db.r, func(s Scanner) (AttemptStat, error) {
		var b AttemptStat
		var n int64
		err := scan(s, &b, &n)
		b.Start = start.Add(time.Duration(n) * bucket)
		return b, err
	}, `SELECT (at - ?) / ? AS b, `+aggregates+` FROM webhook_attempts WHERE webhook_id = ? AND at >= ? AND at < ? GROUP BY b ORDER BY b`,
		start.UnixNano(), int64(bucket), webhookID, start.UnixNano(), end.UnixNano())
	return all, buckets, err
}
