package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// The lists by state are served from indexes: no full scan of the table and
// no sort of the matching rows, whatever states are asked for.
//
// On PostgreSQL the same holds once the table has statistics (ANALYZE, as
// autovacuum keeps them): an index scan of the same index, no Seq Scan, no
// Sort node.
func TestListQueriesUseIndexes(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		org, _, err := db.EnsureOrg(ctx, "o1", 0)
		if err != nil {
			t.Fatal(err)
		}
		// Other tenants share the table (PostgreSQL's planner, which has
		// statistics, would otherwise rightly walk the primary key of a
		// table holding one org only).
		other, _, err := db.EnsureOrg(ctx, "o2", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			for i := range 9000 {
				r := &Record{ID: fmt.Sprintf("x%05d", i), OrgID: other.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhaseDeleted, TemplateID: "base"}
				if err := InsertFixtureTx(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Enough rows, in the skewed mix of a long-lived org, for the plan to matter.
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			for i := range 3000 {
				phase := sandbox.PhaseDeleted
				if i%100 == 0 {
					phase = sandbox.PhaseRunning
				}
				r := &Record{ID: fmt.Sprintf("r%05d", i), OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: phase, TemplateID: "base"}
				if err := InsertFixtureTx(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if db.Dialect() == Postgres {
			if _, err := db.Exec(ctx, `ANALYZE sandboxes`); err != nil {
				t.Fatal(err)
			}
		}
		live := []sandbox.Phase{sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhaseRunning, sandbox.PhasePausing, sandbox.PhasePaused, sandbox.PhaseResuming}
		for _, f := range []RecordFilter{
			{OrgID: org.ID, Phases: live, Kinds: []string{sandbox.KindRuntime, sandbox.KindWorld}, Limit: 101},
			{OrgID: org.ID, Phases: []sandbox.Phase{sandbox.PhaseStopping, sandbox.PhaseDeleted, sandbox.PhaseFailed}, Kinds: []string{sandbox.KindRuntime, sandbox.KindWorld}, Limit: 101},
			{OrgID: org.ID, Phases: []sandbox.Phase{sandbox.PhaseRunning}, Limit: 51, AfterSeq: 10},
			{OrgID: org.ID, Limit: 51},
		} {
			// ListRecords runs one query per phase (see listRefs).
			per := []RecordFilter{f}
			if len(f.Phases) > 1 {
				per = nil
				for _, p := range f.Phases {
					one := f
					one.Phases = []sandbox.Phase{p}
					per = append(per, one)
				}
			}
			for _, one := range per {
				q, args := listQuery(db.Dialect(), one)
				plan := explain(t, db, q, args)
				if db.Dialect() == Postgres {
					// PostgreSQL's planner has statistics and picks by cost: for a
					// phase with few rows it may read sandboxes_phase and sort
					// them, for a common one walk an org index filtering by phase.
					// What must never happen is reading the whole table.
					if !strings.Contains(plan, "Index") || strings.Contains(plan, "Seq Scan") {
						t.Errorf("phases %v: plan %q reads the whole table, want an index", one.Phases, plan)
					}
					continue
				}
				want := "sandboxes_org_phase_seq (org_id=? AND phase=? AND seq>?)"
				if len(one.Phases) == 0 {
					want = "sandboxes_org_seq (org_id=? AND seq>?)"
				}
				if !strings.Contains(plan, want) || strings.Contains(plan, "TEMP B-TREE") {
					t.Errorf("phases %v: plan %q, want an ordered walk of %s", one.Phases, plan, want)
				}
			}
			recs, err := db.ListRecords(ctx, f)
			if err != nil || len(recs) == 0 || len(recs) > f.Limit {
				t.Fatalf("phases %v: %d records, %v", f.Phases, len(recs), err)
			}
			for i, r := range recs {
				if len(f.Phases) > 0 && !containsPhase(f.Phases, r.Phase) || r.Seq <= f.AfterSeq || i > 0 && r.Seq <= recs[i-1].Seq {
					t.Fatalf("phases %v: listed %s (%s, seq %d) out of filter or order", f.Phases, r.ID, r.Phase, r.Seq)
				}
			}
		}
	})
}

func explain(t *testing.T, db *DB, q string, args []any) string {
	t.Helper()
	if db.Dialect() == Postgres {
		lines, err := QueryStrings(context.Background(), db.r, `EXPLAIN `+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "; ")
	}
	rows, err := db.r.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

func containsPhase(ps []sandbox.Phase, p sandbox.Phase) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// A page of several phases is one snapshot: records moving between the
// listed phases while pages are read (pause and resume, round and round)
// are each listed exactly once, never twice and never left out.
func TestListAcrossPhasesWhileRecordsMove(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		const n = 20
		cycle := []sandbox.Phase{sandbox.PhasePausing, sandbox.PhasePaused, sandbox.PhaseResuming, sandbox.PhaseRunning}
		var org string
		for i := range n {
			r := newRecord(t, db, fmt.Sprintf("m%02d", i))
			org = r.OrgID
			for _, p := range []sandbox.Phase{sandbox.PhaseCreating, sandbox.PhaseRunning} {
				if _, err := db.Transition(ctx, r.ID, p, sandbox.CauseReconciler, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		stop := make(chan struct{})
		moved := make(chan error, 1)
		go func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					moved <- nil
					return
				default:
				}
				for i := range n {
					if _, err := db.Transition(ctx, fmt.Sprintf("m%02d", i), cycle[k%len(cycle)], sandbox.CauseUser, nil); err != nil {
						moved <- err
						return
					}
				}
			}
		}()
		// The phases in an order that both kinds of move cross.
		f := RecordFilter{OrgID: org, Limit: 100, Phases: []sandbox.Phase{sandbox.PhasePaused, sandbox.PhaseRunning, sandbox.PhaseResuming, sandbox.PhasePausing}}
		for range 200 {
			recs, err := db.ListRecords(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, r := range recs {
				seen[r.ID]++
			}
			if len(recs) != n || len(seen) != n {
				close(stop)
				_ = <-moved
				t.Fatalf("listed %d records, %d distinct, of %d always in a listed phase: %v", len(recs), len(seen), n, seen)
			}
		}
		close(stop)
		if err := <-moved; err != nil {
			t.Fatal(err)
		}
	})
}

// Newest first (Desc) lists exactly the records oldest first lists, in
// reverse, page by page through the cursor, on either database, with and
// without phase filters (one query, and one per phase merged); records
// inserted while paging newest first are not shown (they are before the
// first page), and the pages still walk an index without sorting.
func TestListNewestFirst(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		org, _, err := db.EnsureOrg(ctx, "o1", 0)
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := db.EnsureOrg(ctx, "o2", 0)
		if err != nil {
			t.Fatal(err)
		}
		phases := []sandbox.Phase{sandbox.PhaseRunning, sandbox.PhasePaused, sandbox.PhaseDeleted}
		insert := func(id, orgID string, p sandbox.Phase) {
			r := &Record{ID: id, OrgID: orgID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: p, TemplateID: "base"}
			if err := db.Tx(ctx, func(tx *sql.Tx) error { return InsertFixtureTx(ctx, tx, r) }); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 60 {
			insert(fmt.Sprintf("a%03d", i), org.ID, phases[i%3])
			insert(fmt.Sprintf("b%03d", i), other.ID, phases[i%3])
		}
		page := func(f RecordFilter, limit int, during func()) []string {
			var ids []string
			f.Limit = limit + 1
			for range 1000 {
				recs, err := db.ListRecords(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				more := len(recs) > limit
				if more {
					recs = recs[:limit]
				}
				for i, r := range recs {
					if r.OrgID != org.ID || len(f.Phases) > 0 && !containsPhase(f.Phases, r.Phase) {
						t.Fatalf("listed %s of org %s in %s: outside the filter", r.ID, r.OrgID, r.Phase)
					}
					if i > 0 && (f.Desc && r.Seq >= recs[i-1].Seq || !f.Desc && r.Seq <= recs[i-1].Seq) {
						t.Fatalf("desc=%v: %s (seq %d) after seq %d", f.Desc, r.ID, r.Seq, recs[i-1].Seq)
					}
					ids = append(ids, r.ID)
				}
				if !more {
					return ids
				}
				f.AfterSeq = recs[len(recs)-1].Seq
				if during != nil {
					during()
				}
			}
			t.Fatal("listing did not end")
			return nil
		}
		for _, ps := range [][]sandbox.Phase{nil, {sandbox.PhasePaused}, {sandbox.PhaseRunning, sandbox.PhaseDeleted}} {
			asc := page(RecordFilter{OrgID: org.ID, Phases: ps}, 7, nil)
			n := 0
			desc := page(RecordFilter{OrgID: org.ID, Phases: ps, Desc: true}, 7, func() {
				n++
				insert(fmt.Sprintf("late%v%03d", len(ps), n), org.ID, sandbox.PhasePaused) // newer than every listed one
			})
			if len(asc) == 0 || len(desc) != len(asc) {
				t.Fatalf("phases %v: %d records newest first, %d oldest first", ps, len(desc), len(asc))
			}
			for i := range asc {
				if desc[i] != asc[len(asc)-1-i] {
					t.Fatalf("phases %v: newest first position %d is %s, want %s", ps, i, desc[i], asc[len(asc)-1-i])
				}
			}
		}
		if db.Dialect() == Postgres {
			return
		}
		for _, f := range []RecordFilter{
			{OrgID: org.ID, Desc: true, Limit: 51},
			{OrgID: org.ID, Desc: true, AfterSeq: 40, Limit: 51},
			{OrgID: org.ID, Phases: []sandbox.Phase{sandbox.PhaseRunning}, Desc: true, AfterSeq: 40, Limit: 51},
		} {
			q, args := listQuery(db.Dialect(), f)
			if plan := explain(t, db, q, args); !strings.Contains(plan, "USING") || strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("%+v: plan %q, want an index walk without a sort", f, plan)
			}
		}
	})
}
