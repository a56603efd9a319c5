package billing

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// List returns one page of the ledger: f.Limit records after f.AfterSeq,
// the seq of the last and whether more follow.
func (s *Service) List(ctx context.Context, f store.RecordFilter) (items []*Record, lastSeq int64, more bool, err error) {
	limit := f.Limit
	f.Limit = limit + 1
	recs, err := s.db.ListRecords(ctx, f)
	if err != nil {
		return nil, 0, false, err
	}
	if len(recs) > limit {
		recs, more = recs[:limit], true
	}
	if recs, err = s.db.WithBilled(ctx, recs...); err != nil {
		return nil, 0, false, err
	}
	items = make([]*Record, 0, len(recs))
	now := s.now()
	for _, rec := range recs {
		items = append(items, s.ViewAt(rec, now))
		lastSeq = rec.Seq
	}
	return items, lastSeq, more, nil
}

// Record reads record id of org; another org's is not found.
func (s *Service) Record(ctx context.Context, org, id string) (*store.Record, error) {
	rec, err := s.db.GetOrgRecordBilled(ctx, org, id) // the billed figures as they are now, not as cached
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.NotFound("sandbox", id)
	}
	return rec, err
}

// Logs reads the output lines of a record: task environments keep theirs
// in the store (if any), sandboxes' come from Config.Logs.
func (s *Service) Logs(ctx context.Context, rec *store.Record) ([]string, error) {
	if sandbox.OwnInstance(rec.Kind) && s.cfg.Logs != nil {
		return s.cfg.Logs(ctx, rec)
	}
	text, err := s.db.SavedLogs(ctx, rec.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// Usage is the answer of GET /sandboxes/usage (the document's Usage).
type Usage = apitypes.Usage

// Usage sums an org's running time: all time, sessions (starts and
// resumes), and the current calendar month (UTC).
func (s *Service) Usage(ctx context.Context, org string) (*Usage, error) {
	now := s.now()
	total, sessions, err := s.db.UsageTotals(ctx, org)
	if err != nil {
		return nil, err
	}
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	spans, err := s.db.UsageSpans(ctx, org, month)
	if err != nil {
		return nil, err
	}
	var monthDur time.Duration
	for _, u := range spans {
		if !u.RunningSince.IsZero() && now.After(u.RunningSince) {
			total += int64(now.Sub(u.RunningSince)) // the live part, not yet folded into runtime_ns
		}
		monthDur += monthSeconds(u, month, now)
	}
	out := &Usage{TotalRuntimeSeconds: seconds(time.Duration(total)), SessionsCount: sessions,
		CurrentMonthSeconds: seconds(monthDur), MonthStart: month}
	if s.cfg.VolumeUsage != nil {
		n, b, err := s.cfg.VolumeUsage(ctx, org)
		if err != nil {
			return nil, err
		}
		out.Volumes, out.VolumeBytes = n, b
	}
	if out.Snapshots, out.SnapshotBytes, err = store.SnapshotUsage(ctx, s.db.Reader(), org); err != nil {
		return nil, err
	}
	return out, nil
}
