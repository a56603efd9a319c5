package runtimes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// fakeSandboxes is the lifecycle service as runtimes see it: it stores each
// created sandbox as a running record and remembers the specs it was given.
type fakeSandboxes struct {
	db    *store.DB
	specs []lifecycle.Spec
	opts  []lifecycle.CreateOptions
	last  string // the id of the last sandbox created
}

func (f *fakeSandboxes) Create(ctx context.Context, org string, spec lifecycle.Spec, opts lifecycle.CreateOptions) (lifecycle.Created, error) {
	f.specs = append(f.specs, spec)
	f.opts = append(f.opts, opts)
	now := time.Now().UTC()
	r := &store.Record{ID: "sbx" + string(rune('a'+len(f.specs))), OrgID: org, Kind: opts.Kind, RuntimeID: opts.RuntimeID, Provider: "fake",
		Phase: sandbox.PhaseRunning, TemplateID: spec.TemplateID, CreatedAt: now, EndAt: now.Add(time.Duration(spec.TimeoutSec) * time.Second)}
	r.MarkRunning(now)
	if err := storetest.InsertFixture(ctx, f.db, r); err != nil {
		return lifecycle.Created{}, err
	}
	f.last = r.ID
	return lifecycle.Created{Record: r, AccessToken: "tok"}, nil
}

func (f *fakeSandboxes) WaitStarted(ctx context.Context, id string) (*store.Record, error) {
	return f.db.GetRecord(ctx, id)
}

func (f *fakeSandboxes) Pause(context.Context, *store.Record) (*store.Record, error) {
	return nil, errors.New("not used")
}

func (f *fakeSandboxes) Resume(context.Context, *store.Record) (*store.Record, bool, error) {
	return nil, false, errors.New("not used")
}

func (f *fakeSandboxes) Delete(context.Context, *store.Record, string) (*store.Record, error) {
	return nil, errors.New("not used")
}

func (f *fakeSandboxes) SetEnd(context.Context, *store.Record, time.Duration, bool) (*store.Record, error) {
	return nil, errors.New("not used")
}

func (f *fakeSandboxes) MinTimeout() int { return 60 }

// broke is a billing service whose org has no credits.
type broke struct{ *billing.Service }

func (broke) Admit(_ context.Context, org string) error {
	return &domain.InsufficientCreditsError{Org: org}
}

// newUnit wires a Service on the database at url (see pgtest.EachDatabase).
func newUnit(t *testing.T, url string) (*Service, *fakeSandboxes, *billing.Service, string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bill, err := billing.New(ctx, billing.Config{DB: db, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := db.EnsureOrg(ctx, "org1", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	sb := &fakeSandboxes{db: db}
	s, err := New(Config{DB: db, Sandboxes: sb, Billing: bill, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return s, sb, bill, org.ID
}

// Start asks the lifecycle service for a sandbox in Go values (no request
// JSON), links it, and answers conflicts and credits as domain errors.
func TestStartCallsLifecycleWithASpec(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		s, sb, bill, org := newUnit(t, url)
		ctx := context.Background()
		cpu := 2
		v, replayed, err := s.Create(ctx, org, "main", NewRuntime{Name: "agent", Resources: &Resources{CPUCount: &cpu},
			EnvVars: map[string]string{"A": "1"}, Metadata: map[string]string{"team": "red"}}, "")
		if err != nil || replayed {
			t.Fatalf("create: %v %v", replayed, err)
		}
		if _, err := s.Pause(ctx, &Runtime{ID: v.ID, OrgID: org}); !isConflictIn(err, "idle") {
			t.Fatalf("pause of an idle runtime: %v", err)
		}
		rt, err := s.Load(ctx, org, "main", v.ID)
		if err != nil {
			t.Fatal(err)
		}
		timeout := 120
		st, err := s.Start(ctx, rt, &timeout)
		if err != nil {
			t.Fatal(err)
		}
		want := lifecycle.Spec{TemplateID: "base", TimeoutSec: 120, CPUCount: &cpu, EnvVars: map[string]string{"A": "1"},
			Metadata: map[string]string{"team": "red"}}
		if len(sb.specs) != 1 || !reflect.DeepEqual(sb.specs[0], want) {
			t.Fatalf("spec %+v, want %+v", sb.specs, want)
		}
		if o := sb.opts[0]; o.Kind != sandbox.KindRuntime || o.RuntimeID != v.ID {
			t.Fatalf("create options %+v", o)
		}
		if st.State != "running" || st.SandboxToken != "tok" || st.Instance == nil || st.SandboxID == nil || *st.SandboxID != sb.last {
			t.Fatalf("started view %+v", st)
		}
		if _, err := s.Start(ctx, rt, nil); !isConflictIn(err, "running") {
			t.Fatalf("second start: %v", err)
		}
		short := 5
		if _, err := s.Start(ctx, rt, &short); !isInvalid(err, "timeout_sec") {
			t.Fatalf("start with a timeout below the minimum: %v", err)
		}
		if _, err := s.Load(ctx, org, "other", v.ID); !isNotFound(err) {
			t.Fatalf("another workspace: %v", err)
		}

		// Without credits a start is refused before the lifecycle is asked.
		s.bill = broke{bill}
		v2, _, err := s.Create(ctx, org, "main", NewRuntime{Name: "second"}, "")
		if err != nil {
			t.Fatal(err)
		}
		rt2, _ := s.Load(ctx, org, "main", v2.ID)
		var credits *domain.InsufficientCreditsError
		if _, err := s.Start(ctx, rt2, nil); !errors.As(err, &credits) || len(sb.specs) != 1 {
			t.Fatalf("start without credits: %v (creates %d)", err, len(sb.specs))
		}
	})
}

func isConflictIn(err error, state string) bool {
	var c *domain.ConflictError
	return errors.As(err, &c) && c.State == state
}

func isInvalid(err error, field string) bool {
	var i *domain.InvalidError
	return errors.As(err, &i) && i.Field == field
}

func isNotFound(err error) bool {
	var n *domain.NotFoundError
	return errors.As(err, &n)
}
