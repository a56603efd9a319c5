package orgmetrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// E2B's steps (its CalculateStep), widened to whole minutes past MaxPoints
// buckets, so a series never has more than MaxPoints buckets.
func TestStep(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		window, want time.Duration
	}{
		{0, 5 * time.Second}, {59 * time.Minute, 5 * time.Second}, {time.Hour, 30 * time.Second},
		{6 * time.Hour, time.Minute}, {12 * time.Hour, 2 * time.Minute}, {24 * time.Hour, 5 * time.Minute},
		{DefaultRange, 15 * time.Minute}, {10 * 24 * time.Hour, 15 * time.Minute},
		{30 * 24 * time.Hour, 44 * time.Minute}, // 43.2 min rounded up: 982 buckets
	} {
		if got := Step(t0, t0.Add(c.window)); got != c.want {
			t.Errorf("Step over %s = %s, want %s", c.window, got, c.want)
		}
	}
	// The widest window a query may name (1970 to E2B's MaxDate), more than
	// a time.Duration holds, still gives at most MaxPoints buckets.
	wide := Step(time.Unix(0, 0), MaxDate)
	if n := (MaxDate.Unix() + int64(wide/time.Second) - 1) / int64(wide/time.Second); n > MaxPoints || wide%time.Minute != 0 {
		t.Fatalf("Step over 1970..2299 = %s: %d buckets", wide, n)
	}
}

// Window takes Unix seconds, defaults to the last 7 days, and refuses what
// E2B refuses with its messages, naming the query parameter.
func TestWindow(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0).UTC()
	s := &Service{now: func() time.Time { return now }}
	from, to, err := s.Window("", "")
	if err != nil || !from.Equal(now.Add(-DefaultRange)) || !to.Equal(now) {
		t.Fatalf("default window %s..%s %v", from, to, err)
	}
	from, to, err = s.Window("1600000000", "1600000100")
	if err != nil || from.Unix() != 1600000000 || to.Unix() != 1600000100 {
		t.Fatalf("window %s..%s %v", from, to, err)
	}
	for _, c := range []struct{ start, end, field, msg string }{
		{"1700000000", "10413792000", "end", "end time cannot be after 2299-12-31 23:59:59.999999999 +0000 UTC"},
		{"10413792000", "", "start", "start time cannot be after 2299-12-31"},
		{"1700000001", "", "start", "start time cannot be after end time"},
		{"10", "5", "start", "start time cannot be after end time"},
		{"-1", "", "start", "not a Unix time"},
		{"", "soon", "end", "not a Unix time"},
		{"", "99999999999999999999", "end", "not a Unix time"},
	} {
		_, _, err := s.Window(c.start, c.end)
		var inv *domain.InvalidError
		if !errors.As(err, &inv) || inv.In != domain.InQuery || inv.Field != c.field || !strings.Contains(inv.Msg, c.msg) {
			t.Errorf("Window(%q, %q) = %v, want a query error naming %s: %q", c.start, c.end, err, c.field, c.msg)
		}
	}
}

// The series and maxima are read from the ledger on SQLite and PostgreSQL:
// first starts and the running spans of each record's timeline (a pause
// leaves a gap), of this org's sandboxes only, task environments' left out.
func TestSeriesAndMaxFromTheLedger(t *testing.T) {
	t.Parallel()
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		for _, o := range []string{"org1", "org2", "idle", "fresh"} {
			if _, _, err := db.EnsureOrg(ctx, o, 1000); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Unix(1_700_000_000, 0).UTC()
		at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
		insert := func(id, org, kind string, phases ...any) {
			t.Helper()
			r := &store.Record{ID: id, OrgID: org, Kind: kind, Provider: "test", ProviderID: id, TemplateID: "base",
				CPUCount: 1, MemoryMB: 512, CreatedAt: at(phases[1].(int) - 1)}
			for i := 0; i < len(phases); i += 2 {
				p, when := phases[i].(sbx.Phase), at(phases[i+1].(int))
				r.Phase = p
				r.Timeline = append(r.Timeline, store.TimelineEntry{Phase: string(p), At: when})
				if p == sbx.PhaseRunning && r.StartedAt.IsZero() {
					r.StartedAt = when
				}
				if p == sbx.PhaseDeleted {
					r.KilledAt = when
				}
			}
			if err := storetest.InsertFixture(ctx, db, r); err != nil {
				t.Fatal(err)
			}
		}
		insert("a", "org1", sbx.KindRuntime, sbx.PhaseRunning, 10, sbx.PhaseDeleted, 100)
		insert("b", "org1", sbx.KindRuntime, sbx.PhaseRunning, 20, sbx.PhasePausing, 50, sbx.PhasePaused, 51, sbx.PhaseResuming, 79, sbx.PhaseRunning, 80)
		insert("task", "org1", sbx.KindTask, sbx.PhaseRunning, 12, sbx.PhaseDeleted, 60)       // a task environment's: not counted
		insert("other", "org2", sbx.KindRuntime, sbx.PhaseRunning, 11, sbx.PhaseDeleted, 90)   // another org's
		insert("old", "org1", sbx.KindRuntime, sbx.PhaseRunning, -500, sbx.PhaseDeleted, -400) // ended before the window
		insert("late", "org1", sbx.KindWorld, sbx.PhaseRunning, 200, sbx.PhaseDeleted, 210)    // started after it
		insert("spanning", "org1", sbx.KindWorld, sbx.PhaseRunning, -30, sbx.PhaseDeleted, 3)  // started before it, ran into it
		s := &Service{db: db, now: func() time.Time { return at(120) }}

		step, points, err := s.Series(ctx, "org1", t0, at(120))
		if err != nil {
			t.Fatal(err)
		}
		if step != 5*time.Second {
			t.Fatalf("step %s", step)
		}
		got := map[int][2]int{} // second → concurrent, starts
		for _, p := range points {
			got[int(p.At.Sub(t0)/time.Second)] = [2]int{p.Concurrent, p.Starts}
			if want := float64(p.Starts) / 5; p.StartRate != want {
				t.Errorf("rate at %s: %v, want %v", p.At, p.StartRate, want)
			}
		}
		want := map[int][2]int{0: {1, 0}, 10: {1, 1}, 15: {1, 0}, 20: {2, 1}, 25: {2, 0}, 30: {2, 0}, 35: {2, 0}, 40: {2, 0}, 45: {2, 0},
			50: {1, 0}, // b pausing from +50s: not running
			55: {1, 0}, 60: {1, 0}, 65: {1, 0}, 70: {1, 0}, 75: {1, 0}, 80: {2, 0}, 85: {2, 0}, 90: {2, 0}, 95: {2, 0},
			100: {1, 0}, 105: {1, 0}, 110: {1, 0}, 115: {1, 0}} // b still runs up to now (120)
		if len(got) != len(want) {
			t.Errorf("buckets %v, want %v", got, want)
		}
		for sec, w := range want {
			if got[sec] != w {
				t.Errorf("bucket at +%ds: (concurrent, starts) = %v, want %v", sec, got[sec], w)
			}
		}

		m, err := s.Max(ctx, "org1", ConcurrentSandboxes, t0, at(120))
		if err != nil || m.Value != 2 || !m.At.Equal(at(20)) {
			t.Fatalf("max concurrent %+v %v, want 2 at +20s", m, err)
		}
		m, err = s.Max(ctx, "org1", SandboxStartRate, t0, at(120))
		if err != nil || m.Value != 0.2 || !m.At.Equal(at(10)) {
			t.Fatalf("max start rate %+v %v, want 0.2 at +10s", m, err)
		}
		// A window that holds only b's pause: b is not running, a is.
		if m, _ := s.Max(ctx, "org1", ConcurrentSandboxes, at(55), at(75)); m.Value != 1 {
			t.Fatalf("max concurrent during b's pause: %+v", m)
		}

		// An org without sandboxes: no points, maxima 0 at now.
		if _, points, err := s.Series(ctx, "idle", t0, at(120)); err != nil || len(points) != 0 {
			t.Fatalf("idle org: %+v %v", points, err)
		}
		for _, metric := range []string{ConcurrentSandboxes, SandboxStartRate} {
			if m, err := s.Max(ctx, "idle", metric, t0, at(120)); err != nil || m.Value != 0 || !m.At.Equal(at(120)) {
				t.Fatalf("idle org's max %s: %+v %v", metric, m, err)
			}
		}
		// A sandbox that began running within the window's last millisecond
		// (a read right after a create answered) is in the last bucket: it
		// was dropped when slots were found from whole milliseconds.
		edge, end := at(120).Add(100*time.Microsecond), at(120).Add(900*time.Microsecond)
		if err := storetest.InsertFixture(ctx, db, &store.Record{ID: "edge", OrgID: "fresh", Kind: sbx.KindRuntime, Provider: "test", ProviderID: "edge",
			TemplateID: "base", CPUCount: 1, MemoryMB: 512, CreatedAt: at(119), Phase: sbx.PhaseRunning, StartedAt: edge,
			Timeline: []store.TimelineEntry{{Phase: string(sbx.PhaseRunning), At: edge}}}); err != nil {
			t.Fatal(err)
		}
		fresh := &Service{db: db, now: func() time.Time { return end }}
		if _, points, err := fresh.Series(ctx, "fresh", t0, end); err != nil || len(points) != 1 || points[0].Concurrent != 1 || points[0].Starts != 1 {
			t.Fatalf("a sandbox started in the window's last millisecond: %+v %v", points, err)
		}
		if m, err := fresh.Max(ctx, "fresh", ConcurrentSandboxes, t0, end); err != nil || m.Value != 1 {
			t.Fatalf("its max concurrent: %+v %v", m, err)
		}
		var inv *domain.InvalidError
		if _, err := s.Max(ctx, "org1", "memory", t0, at(120)); !errors.As(err, &inv) || inv.Field != "metric" {
			t.Fatalf("unknown metric: %v", err)
		}
	})
}
