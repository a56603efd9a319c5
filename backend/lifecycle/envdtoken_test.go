package lifecycle

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
)

// The envd token of a sandbox created through /e2b with secure is derived
// from its id: the same on every call and after connect rotates the access
// token, another sandbox's differs, and a non-secure or native sandbox has
// none. The secure flag survives the round trip through the database.
func TestEnvdTokenDerived(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	mk := func(secure *bool) string {
		c, err := g.s.Create(ctx, g.org, Spec{TimeoutSec: 300, E2BSecure: secure}, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Record.ID
	}
	yes, no := true, false
	a, b, open, native := mk(&yes), mk(&yes), mk(&no), mk(nil)
	tok := func(id string) string {
		t.Helper()
		s, err := g.s.EnvdToken(ctx, g.get(t, id))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ta := tok(a)
	if !strings.HasPrefix(ta, envdTokenPrefix) || len(ta) != len(envdTokenPrefix)+64 || ta == tok(b) {
		t.Fatalf("envd tokens %q and %q", ta, tok(b))
	}
	if _, err := g.s.RotateToken(ctx, a); err != nil {
		t.Fatal(err)
	}
	// A second service over the same database (another replica) derives the same.
	other := New(Config{DB: g.db, Reconciler: g.s.rc, Provider: g.fake})
	if again, err := other.EnvdToken(ctx, g.get(t, a)); err != nil || again != ta || tok(a) != ta {
		t.Fatalf("after a rotation / on another replica: %q %v, want %q", again, err, ta)
	}
	if tok(open) != "" || tok(native) != "" {
		t.Fatalf("non-secure %q, native %q: want none", tok(open), tok(native))
	}
	if !envdOpen(g.get(t, open)) || envdOpen(g.get(t, native)) || envdOpen(g.get(t, a)) {
		t.Fatal("envdOpen: only the non-secure E2B sandbox is open")
	}
}

// hostTarget: {port}-{id}[-{clientID}].{any domain} is a sandbox's only for a
// known id; the configured domain keeps its own rules; the API's hosts are
// never a sandbox's.
func TestHostTargetForeignDomains(t *testing.T) {
	g := newSvcRig(t)
	c, err := g.s.Create(context.Background(), g.org, Spec{TimeoutSec: 300}, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := c.Record.ID
	for _, tc := range []struct {
		host    string
		matched bool
		port    int
	}{
		{"49983-" + id + ".localhost", true, 49983},
		{"49983-" + id + ".localhost:8080", true, 49983},
		{"8080-" + id + "-dreadnode.example.test", true, 8080},
		{"3000-" + id + ".a.b.example.", true, 3000},
		{"49983-nosuch.localhost", true, 49983}, // the configured domain: routed, then 502 (gone)
		{"49983-nosuch.example.test", false, 0}, // elsewhere an unknown id is the API's
		{"70000-" + id + ".example.test", false, 0},
		{"0-" + id + ".example.test", false, 0},
		{"+80-" + id + ".example.test", false, 0},
		{"x-" + id + ".example.test", false, 0},
		{"www." + id + ".example.test", false, 0},
		{"49983-" + id, false, 0},
		{"127.0.0.1:8080", false, 0},
		{"localhost:8080", false, 0},
		{"[::1]:8080", false, 0},
		{"api.example.test", false, 0},
	} {
		r := httptest.NewRequest("GET", "/health", nil)
		r.Host = tc.host
		a, matched := g.s.hostTarget(r)
		if matched != tc.matched || (matched && a.err == nil && a.port != tc.port) {
			t.Errorf("Host %s: matched %v port %d (%v), want %v port %d", tc.host, matched, a.port, a.err, tc.matched, tc.port)
		}
	}
}
