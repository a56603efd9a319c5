package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Run is what an org's metrics read of one sandbox record: when it first
// started, and the spans its timeline shows it running (To zero: it still
// runs).
type Run struct {
	Started time.Time
	Spans   []Span
}

// Span is a stretch of running time.
type Span struct{ From, To time.Time }

// OrgRuns calls fn with the run of each of org's sandboxes (task
// environments' records left out, as the E2B edge leaves them out) that
// started by to and had not ended before from. Rows are streamed, so memory
// holds one record's timeline at a time whatever the org's size.
func (db *DB) OrgRuns(ctx context.Context, org string, from, to time.Time, fn func(Run)) error {
	rows, err := db.r.QueryContext(ctx, `SELECT s.started_at, s.timeline FROM sandboxes s
		WHERE s.org_id = ? AND s.kind NOT IN (`+SQLList(sandbox.GroupMemberKinds)+`) AND s.started_at IS NOT NULL AND s.started_at <= ? AND (s.killed_at IS NULL OR s.killed_at >= ?)`,
		org, to.UnixNano(), from.UnixNano())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var started int64
		var timeline string
		if err := rows.Scan(&started, &timeline); err != nil {
			return err
		}
		var tl []TimelineEntry
		if err := json.Unmarshal([]byte(timeline), &tl); err != nil {
			return fmt.Errorf("decoding a timeline of org %s: %w", org, err)
		}
		fn(Run{Started: time.Unix(0, started).UTC(), Spans: runningSpans(tl)})
	}
	return rows.Err()
}

// runningSpans reads the spans a timeline spent in the running phase.
func runningSpans(tl []TimelineEntry) []Span {
	var out []Span
	var open *Span
	for _, e := range tl {
		running := sandbox.Phase(e.Phase) == sandbox.PhaseRunning
		switch {
		case running && open == nil:
			out = append(out, Span{From: e.At})
			open = &out[len(out)-1]
		case !running && open != nil:
			open.To, open = e.At, nil
		}
	}
	return out
}
