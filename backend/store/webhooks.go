package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// GetWebhook reads an org's webhook; another org's is ErrNotFound.
func (db *DB) GetWebhook(ctx context.Context, orgID, id string) (*Webhook, error) {
	return scanWebhook(db.r.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ? AND org_id = ?`, id, orgID))
}

// ListWebhooks lists an org's webhooks, oldest first.
func (db *DB) ListWebhooks(ctx context.Context, orgID string) ([]*Webhook, error) {
	return QueryAll(ctx, db.r, scanWebhook, `SELECT `+webhookColumns+` FROM webhooks WHERE org_id = ? ORDER BY created_at, id`, orgID)
}

// DeleteWebhook removes an org's webhook and its deliveries.
func (db *DB) DeleteWebhook(ctx context.Context, orgID, id string) error {
	return db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND org_id = ?`, id, orgID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
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
		for _, e := range evs {
			for _, h := range hooks {
				if h.OrgID != e.OrgID || e.Seq <= h.FromSeq || !h.Wants(e.Type) {
					continue
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, event_seq, event_id, event_type,
					sandbox_id, body, status, created_at, next_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
					ON CONFLICT (webhook_id, event_seq) DO NOTHING`,
					newID(), h.ID, e.Seq, e.ID, e.Type, e.SandboxID, string(render(e)), DeliveryPending, now.UnixNano(), now.UnixNano()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if errors.Is(err, errFanOutRaced) {
		return 0, nil
	}
	return len(evs), err
}

var errFanOutRaced = errors.New("another replica fanned these events out")

// ClaimDeliveries claims up to limit due deliveries of enabled webhooks
// for owner until now+hold: each the oldest pending one of its webhook
// and sandbox, so a sandbox's events are delivered in order. A claim whose
// holder died expires and is taken again (at least once).
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now time.Time, hold time.Duration, limit int) ([]*Delivery, error) {
	ids, err := QueryStrings(ctx, db.r, `SELECT d.id FROM webhook_deliveries d
		WHERE d.status = ? AND d.next_at <= ? AND (d.claim_expires IS NULL OR d.claim_expires < ?)
		AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.enabled = 1)
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id AND e.sandbox_id = d.sandbox_id
			AND e.status = ? AND e.event_seq < d.event_seq)
		ORDER BY d.event_seq LIMIT ?`, DeliveryPending, now.UnixNano(), now.UnixNano(), DeliveryPending, limit)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// One statement claims them all (a row another replica claimed since
	// the read is skipped by the WHERE): a round trip per row held the
	// dispatcher far below 1,000 deliveries a second on PostgreSQL.
	args := []any{owner, now.Add(hold).UnixNano(), DeliveryPending, now.UnixNano()}
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

// DeliveryResult is the outcome of one attempt.
type DeliveryResult struct {
	Status int    // the receiver's HTTP status (0: no answer)
	Error  string // why it failed ("" on success)
	At     time.Time
	// Retry is when to try again after a failure; zero gives up: the
	// delivery fails and its webhook is disabled with DisableReason.
	Retry         time.Time
	DisableReason string
}

// FinishDelivery records an attempt of d by owner (ignored when the claim
// was lost meanwhile: the new holder's attempt counts).
func (db *DB) FinishDelivery(ctx context.Context, d *Delivery, owner string, r DeliveryResult) error {
	return db.Tx(ctx, func(tx *sql.Tx) error {
		status, next, delivered := DeliveryPending, NanosOrNull(r.Retry), any(nil)
		switch {
		case r.Error == "":
			status, next, delivered = DeliveryDelivered, r.At.UnixNano(), r.At.UnixNano()
		case r.Retry.IsZero():
			status, next = DeliveryFailed, r.At.UnixNano()
		}
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, next_at = ?,
			last_status = ?, last_error = ?, delivered_at = ?, claimed_by = NULL, claim_expires = NULL
			WHERE id = ? AND claimed_by = ?`, status, next, r.Status, r.Error, delivered, d.ID, owner)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 || status != DeliveryFailed {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhooks SET enabled = 0, disabled_reason = ? WHERE id = ?`, r.DisableReason, d.WebhookID)
		return err
	})
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
