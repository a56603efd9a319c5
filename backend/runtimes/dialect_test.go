package runtimes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// One PostgreSQL cluster for the package; each test gets its own database.
func TestMain(m *testing.M) { pgtest.Main(m) }

// Runtimes get increasing seqs (the list cursor) on either database, and
// creates racing on one name through two replicas make one runtime and
// answer every other create 409, never a database error.
func TestRuntimeSeqAndNameRace(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		s, _, _, org := newUnit(t, url)
		// A second replica: its own Service on its own store.
		s2, _, _, org2 := newUnit(t, url)
		if org2 != org {
			t.Fatalf("two stores on one database see orgs %s and %s", org, org2)
		}
		replicas := []*Service{s, s2}
		ctx := context.Background()
		for i := range 3 {
			if _, _, err := s.Create(ctx, org, "main", NewRuntime{Name: fmt.Sprintf("r%d", i)}, ""); err != nil {
				t.Fatal(err)
			}
		}
		page, err := s.listRuntimes(ctx, org, "main", 0, 2)
		if err != nil || len(page) != 2 || page[0].Seq <= 0 || page[1].Seq <= page[0].Seq {
			t.Fatalf("first page %+v %v: want 2 runtimes with increasing positive seqs", page, err)
		}
		rest, err := s.listRuntimes(ctx, org, "main", page[1].Seq, 2)
		if err != nil || len(rest) != 1 || rest[0].Name != "r2" {
			t.Fatalf("page after seq %d: %+v %v, want r2 alone", page[1].Seq, rest, err)
		}
		// The inserted runtime knows its own seq, as the database stored it.
		now := time.Now()
		rt := &Runtime{ID: "rt-direct", OrgID: org, Workspace: "main", Name: "direct", TemplateID: "base", TimeoutSec: 60,
			CreatedAt: now, UpdatedAt: now}
		if _, _, err := s.insertRuntime(ctx, rt, ""); err != nil {
			t.Fatal(err)
		}
		if stored, err := s.getRuntime(ctx, org, "main", rt.ID); err != nil || rt.Seq != stored.Seq || rt.Seq <= rest[0].Seq {
			t.Fatalf("inserted seq %d, stored %+v (%v); want the stored seq, after %d", rt.Seq, stored, err, rest[0].Seq)
		}

		const n = 8
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _, err := replicas[i%2].Create(ctx, org, "main", NewRuntime{Name: "same"}, "")
				errs <- err
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		made := 0
		for err := range errs {
			var c *domain.ConflictError
			switch {
			case err == nil:
				made++
			case !errors.As(err, &c):
				t.Fatalf("a racing create of one name: %v, want a 409 conflict", err)
			}
		}
		if made != 1 {
			t.Fatalf("%d creates of one name succeeded, want 1", made)
		}
	})
}

// The runtime list pages newest first (order=desc) as it pages oldest
// first, reversed, on either database; a runtime created while paging newest
// first is before the first page and not listed.
func TestRuntimeListNewestFirst(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		s, _, _, org := newUnit(t, url)
		ctx := context.Background()
		var names []string
		for i := range 7 {
			names = append(names, fmt.Sprintf("o%d", i))
			if _, _, err := s.Create(ctx, org, "main", NewRuntime{Name: names[i]}, ""); err != nil {
				t.Fatal(err)
			}
		}
		walk := func(desc bool) []string {
			var got []string
			var after int64
			for range 100 {
				views, last, more, err := s.List(ctx, org, "main", after, 3, desc)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range views {
					got = append(got, v.Name)
				}
				if !more {
					return got
				}
				after = last
				if desc {
					if _, _, err := s.Create(ctx, org, "main", NewRuntime{Name: fmt.Sprintf("late%d", len(got))}, ""); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Fatal("listing did not end")
			return nil
		}
		asc := walk(false)
		desc := walk(true)
		if fmt.Sprint(asc) != fmt.Sprint(names) || len(desc) != len(names) {
			t.Fatalf("oldest first %v, newest first %v; want %v and its reverse", asc, desc, names)
		}
		for i := range names {
			if desc[i] != names[len(names)-1-i] {
				t.Fatalf("newest first %v, want the reverse of %v", desc, names)
			}
		}
	})
}
