// Package replicas starts several real backend processes on one PostgreSQL
// database and one provider, as a scaled-out deployment runs (API.md §8),
// and lets tests kill, freeze and thaw them one at a time. The replicas share
// the bootstrapped org and API key, so any of them can be addressed.
package replicas

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Options shape a set of replicas.
type Options struct {
	// N is the number of replicas; default 3.
	N int
	// DatabaseURL is the shared postgres:// database; default a fresh
	// database of the package's shared cluster (pgtest.Main must run).
	DatabaseURL string
	// LeaseTTL is DREADNODE_LEASE_TTL: how long a silent replica keeps its
	// records before another takes them over; default 2s so take-overs
	// happen within a test.
	LeaseTTL time.Duration
	// Interval is DREADNODE_RECONCILE_INTERVAL (the sweep); default 500ms:
	// shorter, three replicas listing containers keep a loaded engine busy.
	Interval time.Duration
	// Env adds variables to every replica (e.g. DREADNODE_PROVIDER=e2b).
	Env map[string]string
	// EnvOf, when set, adds variables to replica i alone (after Env).
	EnvOf func(i int) map[string]string
	// Credits is the bootstrap balance; 0 means backendproc's default.
	Credits float64
}

// Set is a running set of replicas.
type Set struct {
	Replicas    []*backendproc.Backend
	DatabaseURL string
	APIKey      string
	Org         string
	// Deployment is the database's deployment id, the value of the
	// compute.LabelDeployment label on every container the set creates.
	Deployment string
	LeaseTTL   time.Duration
	Interval   time.Duration

	env     map[string]string
	credits float64
}

// Start starts opts.N replicas, one after the other (the first one migrates
// the database and bootstraps the org; the others find both done), each on
// its own loopback port. Processes are stopped and the deployment's
// containers removed at test cleanup.
func Start(t testing.TB, opts Options) *Set {
	t.Helper()
	if opts.N == 0 {
		opts.N = 3
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 2 * time.Second
	}
	if opts.Interval == 0 {
		opts.Interval = 500 * time.Millisecond
	}
	if opts.DatabaseURL == "" {
		opts.DatabaseURL = pgtest.Database(t)
	}
	s := &Set{DatabaseURL: opts.DatabaseURL, APIKey: ids.Token("dn_test"), LeaseTTL: opts.LeaseTTL, Interval: opts.Interval,
		credits: opts.Credits}
	env := map[string]string{
		"DREADNODE_LEASE_TTL":          opts.LeaseTTL.String(),
		"DREADNODE_RECONCILE_INTERVAL": opts.Interval.String(),
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	s.env = env
	// Registered before the replicas start, so it runs after they stop:
	// nothing recreates a container once it is removed.
	t.Cleanup(func() { s.removeContainers(t) })
	for i := range opts.N {
		var extra map[string]string
		if opts.EnvOf != nil {
			extra = opts.EnvOf(i)
		}
		s.Add(t, extra)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.Open(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatalf("replicas: opening the shared database: %v", err)
	}
	defer db.Close()
	if s.Deployment, err = db.DeploymentID(ctx); err != nil {
		t.Fatalf("replicas: reading the deployment id: %v", err)
	}
	return s
}

// Add starts one more replica on the set's database, with the set's
// variables and extra, and returns it (also appended to s.Replicas).
func (s *Set) Add(t testing.TB, extra map[string]string) *backendproc.Backend {
	t.Helper()
	e := map[string]string{"DREADNODE_REPLICA": strconv.Itoa(len(s.Replicas))} // shows in ps; the backend ignores it
	for k, v := range s.env {
		e[k] = v
	}
	for k, v := range extra {
		e[k] = v
	}
	b := backendproc.Start(t, backendproc.Options{DatabaseURL: s.DatabaseURL, APIKey: s.APIKey, Env: e, Credits: s.credits})
	s.Replicas = append(s.Replicas, b)
	s.Org = b.Org
	return b
}

// Kill sends SIGKILL to replica i, as a crash would.
func (s *Set) Kill(i int) { s.Replicas[i].Kill() }

// Freeze stops replica i with SIGSTOP: it keeps its connections (and, as
// far as it knows, its leases) but does nothing until Thaw.
func (s *Set) Freeze(t testing.TB, i int) {
	t.Helper()
	if err := s.Replicas[i].Freeze(); err != nil {
		t.Fatalf("freezing replica %d: %v", i, err)
	}
}

// Thaw resumes replica i with SIGCONT.
func (s *Set) Thaw(t testing.TB, i int) {
	t.Helper()
	if err := s.Replicas[i].Thaw(); err != nil {
		t.Fatalf("thawing replica %d: %v", i, err)
	}
}

// Alive returns the replicas whose process has not exited.
func (s *Set) Alive() []*backendproc.Backend {
	var out []*backendproc.Backend
	for _, b := range s.Replicas {
		if !b.Exited() {
			out = append(out, b)
		}
	}
	return out
}

// TakeOver is the longest a dead replica's records may wait for another
// replica: the lease TTL plus one sweep.
func (s *Set) TakeOver() time.Duration { return s.LeaseTTL + s.Interval }

// Containers lists the deployment's containers (all states) grouped by the
// record they carry (compute.LabelRecord).
func (s *Set) Containers(t testing.TB) map[string][]container.Summary {
	t.Helper()
	cs, err := dockertest.Client(t).ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", compute.LabelDeployment+"="+s.Deployment))})
	if err != nil {
		t.Fatalf("listing the deployment's containers: %v", err)
	}
	out := map[string][]container.Summary{}
	for _, c := range cs {
		out[c.Labels[compute.LabelRecord]] = append(out[c.Labels[compute.LabelRecord]], c)
	}
	return out
}

func (s *Set) removeContainers(t testing.TB) {
	if s.Deployment == "" {
		return
	}
	// Generous: a loaded engine takes seconds per removal.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := dockertest.RemoveDeployment(ctx, dockertest.Client(t), s.Deployment); err != nil {
		t.Errorf("replicas: %v", err)
	}
}

// String names the set in logs.
func (s *Set) String() string {
	return fmt.Sprintf("%d replicas on deployment %s", len(s.Replicas), s.Deployment)
}
