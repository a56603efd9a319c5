// Package orgmetrics answers an org's sandbox metrics over time: how many
// of its sandboxes ran at once and how fast it started them. It reads the
// ledger (each record's first start and the running spans of its
// timeline), so it keeps nothing of its own and sees every replica's
// sandboxes. The native routes (API.md §17) and E2B's team metrics
// (/e2b/teams/{teamID}/metrics, the org being the team) both answer from it.
package orgmetrics

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// MaxDate is the latest start or end a query may name: E2B's (the largest
// ClickHouse DateTime64), so its clients' checks and messages hold here.
var MaxDate = time.Date(2299, 12, 31, 23, 59, 59, 999999999, time.UTC)

// DefaultRange is the window when no start is given: the last 7 days, as E2B.
const DefaultRange = 7 * 24 * time.Hour

// The series is bounded whatever the window: at most MaxPoints buckets, each
// read at slotsPerBucket slots (so at most 60,000 counters in memory), and
// the ledger is streamed record by record. E2B's steps (Step) give fewer
// than 1,000 buckets up to a window of about 10 days; a longer window gets
// wider buckets (whole minutes) instead of more of them.
const (
	MaxPoints      = 1000
	slotsPerBucket = 60
	// startRateStep is the interval E2B's maximum start rate is measured
	// over (its metrics export period); a wider slot is used as it is.
	startRateStep = 5 * time.Second
)

// Metric names of Max (E2B's).
const (
	ConcurrentSandboxes = "concurrent_sandboxes"
	SandboxStartRate    = "sandbox_start_rate"
)

// Point is one bucket of the series.
type Point struct {
	At time.Time
	// Concurrent is the most sandboxes running within one slot of the
	// bucket (a slot is a sixtieth of the bucket, at least a second): a
	// sandbox that ran at all in the bucket is counted.
	Concurrent int
	Starts     int     // sandboxes first started in the bucket
	StartRate  float64 // Starts per second of the bucket
}

// Max is the largest value of a metric in a window and when it was reached.
type Max struct {
	At    time.Time
	Value float64
}

// Service reads the metrics from the ledger.
type Service struct {
	db  *store.DB
	now func() time.Time
}

// New returns the service over db.
func New(db *store.DB) *Service { return &Service{db: db, now: time.Now} }

// Window reads a query's start and end (Unix seconds as given; "" takes the
// default: the last 7 days up to now) and checks them as E2B does, with its
// messages, naming the parameter at fault.
func (s *Service) Window(start, end string) (time.Time, time.Time, error) {
	now := s.now().UTC()
	from, to := now.Add(-DefaultRange), now
	for _, p := range []struct {
		name, raw string
		into      *time.Time
	}{{"start", start, &from}, {"end", end, &to}} {
		if p.raw == "" {
			continue
		}
		v, err := strconv.ParseInt(p.raw, 10, 64)
		if err != nil || v < 0 {
			return from, to, invalid(p.name, fmt.Sprintf("%q is not a Unix time in seconds (an integer, 0 or more)", p.raw))
		}
		if v > MaxDate.Unix() {
			return from, to, invalid(p.name, fmt.Sprintf("%s time cannot be after %s", p.name, MaxDate))
		}
		*p.into = time.Unix(v, 0).UTC()
	}
	if from.After(to) {
		return from, to, invalid("start", "start time cannot be after end time")
	}
	return from, to, nil
}

func invalid(field, msg string) error {
	return &domain.InvalidError{In: domain.InQuery, Field: field, Msg: msg}
}

// Step is the bucket width of a series over [from, to]: E2B's steps (5 s
// under an hour up to 15 min from a week), widened to whole minutes when
// they would give more than MaxPoints buckets.
func Step(from, to time.Time) time.Duration {
	ms := to.UnixMilli() - from.UnixMilli() // in ms: a window may span more than a Duration holds
	var step time.Duration
	switch d := time.Duration(ms) * time.Millisecond; {
	case ms >= int64(DefaultRange/time.Millisecond):
		step = 15 * time.Minute
	case d < time.Hour:
		step = 5 * time.Second
	case d < 6*time.Hour:
		step = 30 * time.Second
	case d < 12*time.Hour:
		step = time.Minute
	case d < 24*time.Hour:
		step = 2 * time.Minute
	default:
		step = 5 * time.Minute
	}
	if ms/step.Milliseconds() >= MaxPoints {
		minutes := (ms/MaxPoints + time.Minute.Milliseconds() - 1) / time.Minute.Milliseconds()
		step = time.Duration(max(minutes, 1)) * time.Minute
	}
	return step
}

// grid counts an org's runs over a window in slots: per slot, the
// sandboxes that ran in it (as a difference array) and those that started.
type grid struct {
	from   int64 // Unix ms
	slotMs int64
	n      int // slots
	k      int // slots per bucket
	diff   []int32
	starts []int32
}

func (s *Service) grid(ctx context.Context, org string, from, to time.Time) (*grid, error) {
	step := Step(from, to).Milliseconds()
	k := int(min(slotsPerBucket, step/1000))
	g := &grid{from: from.UnixMilli(), slotMs: step / int64(k), k: k}
	buckets := max(1, (to.UnixMilli()-g.from+step-1)/step)
	g.n = int(buckets) * k
	g.diff, g.starts = make([]int32, g.n+1), make([]int32, g.n)
	// Slots are found from times, not from milliseconds: a sandbox that
	// started within the window's last millisecond (a read right after a
	// create) is in the last slot, not past the end.
	origin, now := time.UnixMilli(g.from), s.now()
	slotLen := time.Duration(g.slotMs) * time.Millisecond
	slot := func(t time.Time) int { return min(int(t.Sub(origin)/slotLen), g.n-1) }
	err := s.db.OrgRuns(ctx, org, from, to, func(r store.Run) {
		if !r.Started.Before(origin) && !r.Started.After(to) {
			g.starts[slot(r.Started)]++
		}
		for _, sp := range r.Spans {
			a, b := sp.From, now
			if !sp.To.IsZero() && sp.To.Before(now) {
				b = sp.To
			}
			if a.Before(origin) {
				a = origin
			}
			if b.After(to) {
				b = to
			}
			if !b.After(a) {
				continue
			}
			g.diff[slot(a)]++
			g.diff[slot(b.Add(-time.Nanosecond))+1]--
		}
	})
	if err != nil {
		return nil, err
	}
	for i := 1; i <= g.n; i++ { // counts per slot
		g.diff[i] += g.diff[i-1]
	}
	return g, nil
}

func (g *grid) at(slot int) time.Time { return time.UnixMilli(g.from + int64(slot)*g.slotMs).UTC() }

// Series is the org's metrics over [from, to] in buckets of Step(from, to),
// oldest first. Only buckets where a sandbox ran or started are answered (as
// E2B answers only the times it has data for), so an org without sandboxes
// in the window gets none.
func (s *Service) Series(ctx context.Context, org string, from, to time.Time) (time.Duration, []Point, error) {
	g, err := s.grid(ctx, org, from, to)
	if err != nil {
		return 0, nil, err
	}
	step := time.Duration(int64(g.k)*g.slotMs) * time.Millisecond
	out := []Point{}
	for b := 0; b*g.k < g.n; b++ {
		p := Point{At: g.at(b * g.k)}
		for i := b * g.k; i < (b+1)*g.k; i++ {
			p.Concurrent = max(p.Concurrent, int(g.diff[i]))
			p.Starts += int(g.starts[i])
		}
		if p.Concurrent == 0 && p.Starts == 0 {
			continue
		}
		p.StartRate = float64(p.Starts) / step.Seconds()
		out = append(out, p)
	}
	return step, out, nil
}

// Max is the largest value of metric (ConcurrentSandboxes: sandboxes running
// within one slot; SandboxStartRate: starts per second over 5 s, or over a
// slot when the window's slots are wider) in [from, to], and the start of
// the slot it was reached in (the first, on ties). With no data it is 0 at
// now, as E2B answers.
func (s *Service) Max(ctx context.Context, org, metric string, from, to time.Time) (Max, error) {
	if metric != ConcurrentSandboxes && metric != SandboxStartRate {
		return Max{}, invalid("metric", fmt.Sprintf("unknown metric %q; use %s or %s", metric, ConcurrentSandboxes, SandboxStartRate))
	}
	g, err := s.grid(ctx, org, from, to)
	if err != nil {
		return Max{}, err
	}
	best := Max{At: s.now().UTC()}
	if metric == ConcurrentSandboxes {
		for i := 0; i < g.n; i++ {
			if v := float64(g.diff[i]); v > best.Value {
				best = Max{At: g.at(i), Value: v}
			}
		}
		return best, nil
	}
	per := int((startRateStep.Milliseconds() + g.slotMs - 1) / g.slotMs) // slots per measure
	secs := float64(int64(per)*g.slotMs) / 1000
	for i := 0; i < g.n; i += per {
		n := 0
		for j := i; j < min(i+per, g.n); j++ {
			n += int(g.starts[j])
		}
		if v := float64(n) / secs; v > best.Value {
			best = Max{At: g.at(i), Value: v}
		}
	}
	return best, nil
}
