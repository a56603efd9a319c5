package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Event is one lifecycle event (API §12), written by the transition gate
// in the transaction of the change it reports (the events table is an
// outbox: see migration 00012).
type Event struct {
	Seq        int64
	ID         string
	OrgID      string
	SandboxID  string
	Type       string
	At         time.Time
	TemplateID string
	Metadata   map[string]string
	Cause      sandbox.Cause
	Data       EventData
}

// EventData is an event's eventData: E2B's fields (sandbox_metadata,
// execution) and ours.
type EventData struct {
	SandboxMetadata map[string]string `json:"sandbox_metadata"`
	// Execution is set on killed, paused, completed and failed: the run that
	// ended (E2B sets it on killed and paused).
	Execution     *Execution `json:"execution,omitempty"`
	EnvironmentID string     `json:"environment_id,omitempty"` // environment.lifecycle.* only
	KillReason    string     `json:"kill_reason,omitempty"`
	ExitCode      *int       `json:"exit_code,omitempty"`
	EndAt         *time.Time `json:"end_at,omitempty"` // the TTL, on updated
}

// Execution is E2B's event_data.execution.
type Execution struct {
	StartedAt       time.Time `json:"started_at"`
	VCPUCount       int       `json:"vcpu_count"`
	MemoryMB        int       `json:"memory_mb"`
	ExecutionTimeMs int64     `json:"execution_time"` // running time in milliseconds
}

// moveState is what the gate keeps of a record before its change, to tell
// which event (if any) the change produces.
type moveState struct {
	phase    sandbox.Phase
	firstRun bool
	endAt    time.Time
	metadata map[string]string // copied only for a field-only update
}

func beforeMove(r *Record, to sandbox.Phase) moveState {
	s := moveState{phase: r.Phase, firstRun: r.StartedAt.IsZero(), endAt: r.EndAt}
	if to == "" {
		s.metadata = maps.Clone(r.Metadata)
	}
	return s
}

// eventOfMove builds the event r's change from b produces at at, or nil.
func eventOfMove(b moveState, r *Record, to sandbox.Phase, cause sandbox.Cause, at time.Time) *Event {
	m := sandbox.Move{From: b.phase, To: to, FirstRun: b.firstRun}
	if to == "" {
		m.Configured = !b.endAt.Equal(r.EndAt) || !maps.Equal(b.metadata, r.Metadata)
	}
	label := sandbox.EventOf(m)
	if label == "" {
		return nil
	}
	e := &Event{ID: newEventID(), OrgID: r.OrgID, SandboxID: r.ID, Type: sandbox.EventPrefix(r.Kind) + label, At: at,
		TemplateID: r.TemplateID, Metadata: nonNilMap(r.Metadata), Cause: cause}
	e.Data.SandboxMetadata = e.Metadata
	e.Data.EnvironmentID = r.EnvironmentID
	switch label {
	case sandbox.EventKilled, sandbox.EventCompleted, sandbox.EventFailed:
		// The cause is what decided the end (a user, the TTL, credits, the
		// provider), recorded on the move into stopping, not the
		// reconciler finishing it.
		e.Cause = stopCause(r, cause)
		e.Data.KillReason, e.Data.ExitCode = r.KillReason, r.ExitCode
		e.Data.Execution = executionOf(r, at)
	case sandbox.EventPaused:
		e.Data.Execution = executionOf(r, at)
	case sandbox.EventUpdated:
		if !r.EndAt.IsZero() {
			end := r.EndAt
			e.Data.EndAt = &end
		}
	}
	return e
}

// stopCause is the cause of r's move into stopping, when its end went
// through stopping, else cause.
func stopCause(r *Record, cause sandbox.Cause) sandbox.Cause {
	tl := r.Timeline
	if n := len(tl); n >= 2 && tl[n-2].Phase == string(sandbox.PhaseStopping) && tl[n-2].Cause != "" {
		return tl[n-2].Cause
	}
	return cause
}

func executionOf(r *Record, at time.Time) *Execution {
	return &Execution{StartedAt: r.LastStartedAt, VCPUCount: r.CPUCount, MemoryMB: r.MemoryMB,
		ExecutionTimeMs: r.RuntimeAt(at).Milliseconds()}
}

func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "evt_" + hex.EncodeToString(b[:])
}

// insertEventTx writes e in the gate's transaction.
func insertEventTx(ctx context.Context, tx *sql.Tx, e *Event) error {
	meta, _ := json.Marshal(e.Metadata)
	data, err := json.Marshal(e.Data)
	if err != nil {
		return err
	}
	err = tx.QueryRowContext(ctx, `INSERT INTO events (id, org_id, sandbox_id, type, at, template_id, metadata, cause, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		e.ID, e.OrgID, e.SandboxID, e.Type, e.At.UnixNano(), e.TemplateID, string(meta), string(e.Cause), string(data)).Scan(&e.Seq)
	if err != nil {
		return fmt.Errorf("writing the %s event of %s: %w", e.Type, e.SandboxID, err)
	}
	return nil
}

// EventFilter selects events for listing, in seq order.
type EventFilter struct {
	OrgID     string
	SandboxID string   // "" = every sandbox of the org
	Types     []string // any of these; empty = all
	Since     time.Time
	AfterSeq  int64 // cursor
	Limit     int
	// Desc lists newest first; Offset skips that many (E2B's paging).
	Desc   bool
	Offset int
}

const eventColumns = `seq, id, org_id, sandbox_id, type, at, template_id, metadata, cause, data`

func scanEvent(s Scanner) (*Event, error) {
	var e Event
	var meta, data string
	if err := s.Scan(&e.Seq, &e.ID, &e.OrgID, &e.SandboxID, &e.Type, nsTime(&e.At), &e.TemplateID, &meta, &e.Cause, &data); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(meta), &e.Metadata); err != nil {
		return nil, fmt.Errorf("decoding event %s: %w", e.ID, err)
	}
	if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
		return nil, fmt.Errorf("decoding event %s: %w", e.ID, err)
	}
	return &e, nil
}

// ListEvents lists an org's events in seq order (per sandbox, the order of
// its changes).
func (db *DB) ListEvents(ctx context.Context, f EventFilter) ([]*Event, error) {
	// AfterSeq is a page's cursor: the events after it in the listing's
	// order, so newest first those below it.
	cmp := ">"
	if f.Desc && f.AfterSeq > 0 {
		cmp = "<"
	}
	q := `SELECT ` + eventColumns + ` FROM events WHERE org_id = ? AND seq ` + cmp + ` ?`
	args := []any{f.OrgID, f.AfterSeq}
	if f.SandboxID != "" {
		q += ` AND sandbox_id = ?`
		args = append(args, f.SandboxID)
	}
	if len(f.Types) > 0 {
		q += ` AND type IN (` + placeholders(len(f.Types)) + `)`
		for _, t := range f.Types {
			args = append(args, t)
		}
	}
	if !f.Since.IsZero() {
		q += ` AND at >= ?`
		args = append(args, f.Since.UnixNano())
	}
	q += ` ORDER BY seq`
	if f.Desc {
		q += ` DESC`
	}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
		if f.Offset > 0 {
			q += ` OFFSET ?`
			args = append(args, f.Offset)
		}
	}
	return QueryAll(ctx, db.r, scanEvent, q, args...)
}

// EventSeq is the seq of the org's event id, ErrNotFound when it has none
// by that id (another org's included). Streams resume from it.
func (db *DB) EventSeq(ctx context.Context, orgID, id string) (int64, error) {
	var seq int64
	err := db.r.QueryRowContext(ctx, `SELECT seq FROM events WHERE id = ? AND org_id = ?`, strings.TrimSpace(id), orgID).Scan(&seq)
	if err == sql.ErrNoRows {
		return 0, ErrNotFound
	}
	return seq, err
}

// DeleteEventsBefore deletes the events older than t (retention), the
// finished webhook deliveries made before t and the delivery attempts made
// before t, and says how many events went.
func (db *DB) DeleteEventsBefore(ctx context.Context, t time.Time) (int64, error) {
	if _, err := db.w.ExecContext(ctx, `DELETE FROM webhook_attempts WHERE at < ?`, t.UnixNano()); err != nil {
		return 0, err
	}
	if _, err := db.w.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE created_at < ? AND status <> ?`, t.UnixNano(), DeliveryPending); err != nil {
		return 0, err
	}
	res, err := db.w.ExecContext(ctx, `DELETE FROM events WHERE at < ?`, t.UnixNano())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// EventSettle is how long a gap in the event sequence is taken for a
// transaction still in flight. On PostgreSQL a seq is taken at the insert
// and becomes visible at the commit, so seq 11 can be visible before seq 10
// is; a reader that moved past the gap would never see 10. A gap older
// than this is a rolled-back transaction (or deleted by retention).
const EventSettle = 2 * time.Second

// EventsAfter reads every org's events after seq, in seq order, stopping
// before a gap younger than settle (see EventSettle): a follower (stream,
// webhook dispatcher) that resumes from the last seq it returns misses
// none. held says it stopped at such a gap (read again soon).
func (db *DB) EventsAfter(ctx context.Context, seq int64, limit int, settle time.Duration, now time.Time) (evs []*Event, held bool, err error) {
	all, err := QueryAll(ctx, db.r, scanEvent, `SELECT `+eventColumns+` FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, seq, limit)
	if err != nil {
		return nil, false, err
	}
	prev := seq
	for i, e := range all {
		if e.Seq != prev+1 && now.Sub(e.At) < settle && prev != 0 {
			return all[:i], true, nil
		}
		prev = e.Seq
	}
	return all, false, nil
}

// LastEventSeq is the largest seq written so far (0: none): where a
// follower without a position starts.
func (db *DB) LastEventSeq(ctx context.Context) (int64, error) {
	var seq sql.NullInt64
	err := db.r.QueryRowContext(ctx, `SELECT MAX(seq) FROM events`).Scan(&seq)
	return seq.Int64, err
}
