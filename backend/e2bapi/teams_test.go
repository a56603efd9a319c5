package e2bapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// E2B's team metrics answer the org's (the team's) concurrency and start
// rate from the ledger, on SQLite and PostgreSQL: nothing for an org that
// never ran a sandbox, then the sandboxes it starts; another team's id is
// E2B's 403; bad input a 400 naming the parameter, with E2B's message where
// E2B's tests read it. Every exchange is checked against E2B's openapi.yml.
// The sandboxes run on the E2B fake: the ledger, not the engine, is read.
func TestE2BTeamMetrics(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			fake := e2bfake.New(t)
			env := appenv.New(t, appenv.Opts{Config: func(c *app.Config) {
				if dialect == "postgres" {
					c.DatabaseURL = pgtest.Start(t).NewDatabase(t)
				}
				c.Provider = "e2b"
				c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
					EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
			}})
			chk, err := e2bfake.NewChecker(nil, "/e2b")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, p := range chk.Problems() {
					t.Errorf("E2B's openapi.yml is not kept: %s", p)
				}
			})
			client := &http.Client{Transport: chk}
			// send calls the edge through c: client checks each exchange
			// against E2B's document, http.DefaultClient (for input E2B's
			// document refuses) does not.
			send := func(c *http.Client, method, path, key string, body any) (int, []byte) {
				t.Helper()
				var rd io.Reader
				if body != nil {
					b, _ := json.Marshal(body)
					rd = bytes.NewReader(b)
				}
				req, err := http.NewRequestWithContext(t.Context(), method, env.Srv.URL+path, rd)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-API-Key", key)
				if body != nil {
					req.Header.Set("Content-Type", "application/json")
				}
				res, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, b
			}
			call := func(method, path, key string, body any) (int, []byte) {
				t.Helper()
				return send(client, method, path, key, body)
			}
			type point struct {
				Timestamp           time.Time `json:"timestamp"`
				TimestampUnix       int64     `json:"timestampUnix"`
				ConcurrentSandboxes int       `json:"concurrentSandboxes"`
				SandboxStartRate    float64   `json:"sandboxStartRate"`
			}
			series := func(key, org, query string) []point {
				t.Helper()
				code, body := call("GET", "/e2b/teams/"+org+"/metrics"+query, key, nil)
				var out []point
				if code != 200 || json.Unmarshal(body, &out) != nil {
					t.Fatalf("metrics of %s%s: %d %s", org, query, code, body)
				}
				return out
			}
			type maxMetric struct {
				TimestampUnix int64   `json:"timestampUnix"`
				Value         float64 `json:"value"`
			}
			maxOf := func(key, org, metric string) maxMetric {
				t.Helper()
				code, body := call("GET", "/e2b/teams/"+org+"/metrics/max?metric="+metric, key, nil)
				var out maxMetric
				if code != 200 || json.Unmarshal(body, &out) != nil {
					t.Fatalf("max %s of %s: %d %s", metric, org, code, body)
				}
				return out
			}

			// An org that never ran a sandbox: no points, maxima 0.
			idleKey := env.AddOrg("idle", 1_000_000)
			if ps := series(idleKey, "idle", ""); len(ps) != 0 {
				t.Fatalf("an idle org's metrics: %+v", ps)
			}
			for _, m := range []string{"concurrent_sandboxes", "sandbox_start_rate"} {
				if v := maxOf(idleKey, "idle", m); v.Value != 0 || v.TimestampUnix == 0 {
					t.Fatalf("an idle org's max %s: %+v", m, v)
				}
			}

			before := time.Now().Unix()
			for range 2 {
				if code, body := call("POST", "/e2b/sandboxes", env.Key, map[string]any{"templateID": "base", "timeout": 300}); code != 201 {
					t.Fatalf("create: %d %s", code, body)
				}
			}
			// The org's two sandboxes run at once and were started: seen at
			// once (the ledger is read per request; no sampling to wait for).
			ps := series(env.Key, env.Org, "")
			concurrent, started := 0, false
			for _, p := range ps {
				concurrent, started = max(concurrent, p.ConcurrentSandboxes), started || p.SandboxStartRate > 0
				if p.TimestampUnix != p.Timestamp.Unix() {
					t.Errorf("timestamp %s and timestampUnix %d differ", p.Timestamp, p.TimestampUnix)
				}
			}
			if concurrent != 2 || !started {
				t.Fatalf("after two creates the org's metrics show at most %d concurrent, a start: %v (%+v)", concurrent, started, ps)
			}
			if v := maxOf(env.Key, env.Org, "concurrent_sandboxes"); v.Value != 2 || v.TimestampUnix < before-15 { // the start of its 15 s slot (a 7-day window)
				t.Fatalf("max concurrent %+v, want 2 in the slot of %d", v, before)
			}
			if v := maxOf(env.Key, env.Org, "sandbox_start_rate"); v.Value <= 0 {
				t.Fatalf("max start rate %+v", v)
			}
			// A window: only points inside it; one before the sandboxes: none.
			now := time.Now().Unix()
			for _, p := range series(env.Key, env.Org, fmt.Sprintf("?start=%d&end=%d", now-3600, now+25)) {
				if p.TimestampUnix < now-3600 || p.TimestampUnix > now+25 {
					t.Errorf("a point at %d outside %d..%d", p.TimestampUnix, now-3600, now+25)
				}
			}
			if ps := series(env.Key, env.Org, fmt.Sprintf("?start=%d&end=%d", before-7200, before-3600)); len(ps) != 0 {
				t.Errorf("points before the sandboxes existed: %+v", ps)
			}
			// The idle org still sees nothing of org1's sandboxes.
			if ps := series(idleKey, "idle", ""); len(ps) != 0 {
				t.Fatalf("the idle org sees another org's sandboxes: %+v", ps)
			}

			// Another team's id (existing or not): E2B's 403.
			for _, other := range []string{"idle", "nosuchteam"} {
				for _, path := range []string{"/metrics", "/metrics/max?metric=concurrent_sandboxes"} {
					code, body := call("GET", "/e2b/teams/"+other+path, env.Key, nil)
					if code != 403 || !strings.Contains(string(body), "are not authorized to access this team's ("+other+") metrics") {
						t.Errorf("team %s%s with org1's key: %d %s", other, path, code, body)
					}
				}
			}
			// Bad input: 400 naming the parameter (E2B's message for the dates).
			for _, c := range []struct{ query, want string }{
				{fmt.Sprintf("/metrics?start=%d&end=%d", now, 10413792000), "end: end time cannot be after 2299-12-31"},
				{fmt.Sprintf("/metrics?start=%d&end=%d", now, now-10), "start: start time cannot be after end time"},
				{"/metrics?start=yesterday", "start: "},
				{"/metrics?end=-5", "end: "},
				{"/metrics/max", "metric: is required"},
				{"/metrics/max?metric=memory", "metric: unknown metric"},
				{fmt.Sprintf("/metrics/max?metric=sandbox_start_rate&end=%d", 10413792000), "end: end time cannot be after"},
			} {
				code, body := send(http.DefaultClient, "GET", "/e2b/teams/"+env.Org+c.query, env.Key, nil)
				var e struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				}
				if code != 400 || json.Unmarshal(body, &e) != nil || e.Code != 400 || !strings.Contains(e.Message, c.want) {
					t.Errorf("%s: %d %s, want 400 with %q", c.query, code, body, c.want)
				}
			}

			// The native view of the same data; another org's path is 404.
			r := env.Req("GET", "/api/v1/org/"+env.Org+"/metrics", nil)
			var native struct {
				StepSeconds int `json:"step_seconds"`
				Points      []struct {
					ConcurrentSandboxes int `json:"concurrent_sandboxes"`
					SandboxStarts       int `json:"sandbox_starts"`
				} `json:"points"`
			}
			if r.Code != 200 || json.Unmarshal(r.Body, &native) != nil || native.StepSeconds != 900 || len(native.Points) == 0 {
				t.Fatalf("native metrics: %d %s", r.Code, r.Body)
			}
			starts := 0
			for _, p := range native.Points {
				starts += p.SandboxStarts
			}
			if starts != 2 {
				t.Errorf("native metrics count %d starts, want 2: %s", starts, r.Body)
			}
			if r := env.Req("GET", "/api/v1/org/"+env.Org+"/metrics/max?metric=concurrent_sandboxes", nil); r.Code != 200 || !strings.Contains(string(r.Body), `"value":2`) {
				t.Errorf("native max: %d %s", r.Code, r.Body)
			}
			if r := env.Req("GET", "/api/v1/org/idle/metrics", nil); r.Code != 404 {
				t.Errorf("another org's native metrics: %d %s", r.Code, r.Body)
			}
			if r := env.Req("GET", "/api/v1/org/"+env.Org+"/metrics?since=1", nil); r.Code != 400 || !strings.Contains(string(r.Body), "since") {
				t.Errorf("an unknown native parameter: %d %s", r.Code, r.Body)
			}
		})
	}
}
