package app

import (
	"bytes"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/api"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// syncBuffer is a log sink tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func limitedApp(t *testing.T, limits api.RateLimits) (*testApp, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	ta := newReplicaLog(t, filepath.Join(t.TempDir(), "db"), e2bfake.New(t), false, slog.New(slog.NewTextHandler(logs, nil)),
		withAdmin, func(c *Config) { c.Limits = limits })
	return ta, logs
}

// §11: one key at ten times its read limit gets 429 with Retry-After and
// the RateLimit fields; another key of the same org, and the first key's
// other classes, are not slowed. (Seen failing with the limiter's check
// removed from the auth middleware: 200 answers, no 429.)
func TestKeyOverItsLimitGets429(t *testing.T) {
	ta, _ := limitedApp(t, api.RateLimits{Class: map[string]api.Rate{api.ClassRead: {PerSecond: 20, Burst: 20}}})
	_, noisy := adminKey(t, ta, "org1", map[string]any{"name": "noisy"})
	path := "/api/v1/org/org1/credits"
	limited, quiet := 0, 0
	start := time.Now()
	for i := 0; i < 200; i++ { // ten times the burst, in far less than the 10 s the limit needs for them
		r := ta.reqKey(noisy, http.MethodGet, path, nil)
		switch r.code {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			limited++
			if s, err := strconv.Atoi(r.hdr.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("429 without a Retry-After in seconds: %q", r.hdr.Get("Retry-After"))
			}
			if r.json(t)["type"] != "rate_limited" {
				t.Fatalf("429 body: %s", r.body)
			}
			if p := r.hdr.Get("RateLimit-Policy"); p != `"read";q=20;w=1` {
				t.Fatalf("RateLimit-Policy %q", p)
			}
			if l := r.hdr.Get("RateLimit"); !strings.HasPrefix(l, `"read";r=0;t=`) {
				t.Fatalf("RateLimit %q", l)
			}
		default:
			t.Fatalf("GET %s: %d %s", path, r.code, r.body)
		}
		if i%10 == 0 { // the org's other key, meanwhile
			if r := ta.req(http.MethodGet, path, nil); r.code != http.StatusOK {
				t.Fatalf("another key of the org slowed by the noisy one: %d %s", r.code, r.body)
			}
			quiet++
		}
	}
	elapsed := time.Since(start)
	if most := 200 - 20 - int(elapsed.Seconds()*20) - 1; limited < most {
		t.Fatalf("%d of 200 requests limited in %s, want at least %d", limited, elapsed, most)
	}
	// Another class of the same key has its own bucket.
	if r := ta.reqKey(noisy, http.MethodPost, "/api/v1/org/org1/keys", map[string]any{"name": "still-creates"}); r.code != http.StatusCreated {
		t.Fatalf("a create by the key whose reads are limited: %d %s", r.code, r.body)
	}
	t.Logf("%d of 200 reads limited in %s; the other key's %d reads all answered", limited, elapsed.Round(time.Millisecond), quiet)
}

// §11: 5,000 bad keys from one address cost the database nothing once the
// address is over its limit of refused keys (counted by the store's key
// lookups), and the log gets a bounded number of lines, none with a key;
// a key the replica already knows still works from that address. (Seen
// failing with the address check removed: 5,000 lookups.)
func TestBadKeysFromOneAddressStopCostingLookups(t *testing.T) {
	ta, logs := limitedApp(t, api.RateLimits{AuthFailures: api.Rate{PerSecond: 2, Burst: 20}})
	if r := ta.req(http.MethodGet, "/api/v1/org/org1/credits", nil); r.code != http.StatusOK { // cached from here on
		t.Fatalf("the org's key: %d", r.code)
	}
	before := ta.app.DB.KeyLookups()
	start := time.Now()
	refused, limited := 0, 0
	for i := 0; i < 5000; i++ {
		r := ta.reqKey("dn_key_guess"+strconv.Itoa(i), http.MethodGet, "/api/v1/org/org1/credits", nil)
		switch r.code {
		case http.StatusUnauthorized:
			refused++
		case http.StatusTooManyRequests:
			limited++
			if r.hdr.Get("Retry-After") == "" {
				t.Fatalf("429 without Retry-After")
			}
		default:
			t.Fatalf("a bad key: %d %s", r.code, r.body)
		}
	}
	elapsed := time.Since(start)
	lookups := ta.app.DB.KeyLookups() - before
	// The refused keys the bucket allows, plus a load of the known keys'
	// prefixes at most once a second (store.MayBeKey).
	if most := int64(20 + 2*elapsed.Seconds() + 1 + elapsed.Seconds() + 1); lookups > most {
		t.Fatalf("5000 bad keys in %s cost %d key lookups, want at most %d", elapsed, lookups, most)
	}
	if r := ta.req(http.MethodGet, "/api/v1/org/org1/credits", nil); r.code != http.StatusOK {
		t.Fatalf("the org's known key from the limited address: %d %s", r.code, r.body)
	}
	out := logs.String()
	lines := strings.Count(out, "API key refused")
	if most := int(5 + elapsed.Seconds() + 1); lines > most || lines == 0 {
		t.Fatalf("%d refusal log lines in %s, want 1 to %d", lines, elapsed, most)
	}
	if strings.Contains(out, "dn_key_guess1") || !strings.Contains(out, "key_prefix=dn_k ") {
		t.Fatalf("the log shows a whole key or no prefix:\n%s", out)
	}
	t.Logf("5000 bad keys in %s: %d refused (401), %d limited (429), %d lookups, %d log lines", elapsed.Round(time.Millisecond), refused, limited, lookups, lines)
}

// Issue 34: an address over its limit of refused keys (a neighbour behind
// the same NAT, or a sandbox, whose traffic leaves from the host's
// address, guessing keys) does not lock out valid keys: a valid key the
// replica has never seen still works from it, and so does the operator
// key; unknown, guessed (even with a real key's prefix) and revoked keys
// get 429, and guesses whose prefix is no key's cost no lookup. (Seen
// failing with the limited address served from the key cache alone, as
// before: the valid, never-used key got 429.)
func TestLimitedAddressStillServesValidKeys(t *testing.T) {
	ta, _ := limitedApp(t, api.RateLimits{AuthFailures: api.Rate{PerSecond: 0.001, Burst: 3}})
	_, fresh := adminKey(t, ta, "org1", map[string]any{"name": "never-used"})
	revokedID, revoked := adminKey(t, ta, "org1", map[string]any{"name": "revoked"})
	if r := ta.reqKey(testAdminKey, http.MethodDelete, "/admin/orgs/org1/keys/"+revokedID, nil); r.code != http.StatusNoContent {
		t.Fatalf("revoking: %d %s", r.code, r.body)
	}
	path := "/api/v1/org/org1/credits"
	for i := 0; i < 3; i++ {
		if r := ta.reqKey("dn_key_guess"+strconv.Itoa(i), http.MethodGet, path, nil); r.code != http.StatusUnauthorized {
			t.Fatalf("bad key %d within the limit: %d %s, want 401", i, r.code, r.body)
		}
	}
	if r := ta.reqKey("dn_key_guess-over", http.MethodGet, path, nil); r.code != http.StatusTooManyRequests || r.hdr.Get("Retry-After") == "" {
		t.Fatalf("a bad key over the limit: %d %s, want 429 with Retry-After", r.code, r.body)
	}
	if r := ta.reqKey(fresh, http.MethodGet, path, nil); r.code != http.StatusOK {
		t.Fatalf("a valid key never used before, from the limited address: %d %s, want 200", r.code, r.body)
	}
	for name, key := range map[string]string{"a guess with a real key's prefix": fresh[:len(fresh)-4] + "0000", "the revoked key": revoked} {
		if r := ta.reqKey(key, http.MethodGet, path, nil); r.code != http.StatusTooManyRequests {
			t.Fatalf("%s from the limited address: %d %s, want 429", name, r.code, r.body)
		}
	}
	r := ta.reqKey(testAdminKey, http.MethodPost, "/admin/orgs/org1/keys", map[string]any{"name": "made-while-limited"})
	if r.code != http.StatusCreated {
		t.Fatalf("the operator key from the limited address: %d %s, want 201", r.code, r.body)
	}
	if r := ta.reqKey(r.json(t)["key"].(string), http.MethodGet, path, nil); r.code != http.StatusOK {
		t.Fatalf("a key made just now, from the limited address: %d %s, want 200", r.code, r.body)
	}
	before, start := ta.app.DB.KeyLookups(), time.Now()
	for i := 0; i < 1000; i++ {
		if r := ta.reqKey("dn_key_guess"+strconv.Itoa(i), http.MethodGet, path, nil); r.code != http.StatusTooManyRequests {
			t.Fatalf("guess %d: %d %s, want 429", i, r.code, r.body)
		}
	}
	if lookups, most := ta.app.DB.KeyLookups()-before, int64(time.Since(start).Seconds())+1; lookups > most {
		t.Fatalf("1000 guesses from the limited address cost %d lookups, want at most %d (one load of the prefixes a second)", lookups, most)
	}
}
