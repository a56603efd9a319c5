package e2bapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
)

// detail reads GET /e2b/sandboxes/{id}.
type detailAnswer struct {
	State     string    `json:"state"`
	StartedAt time.Time `json:"startedAt"`
	EndAt     time.Time `json:"endAt"`
}

func (e *edge) detailOf(id string) detailAnswer {
	e.t.Helper()
	r := e.env.Req("GET", "/e2b/sandboxes/"+id, nil)
	var d detailAnswer
	if r.Code != 200 || json.Unmarshal(r.Body, &d) != nil {
		e.t.Fatalf("GET /e2b/sandboxes/%s: %s", id, r)
	}
	return d
}

func (e *edge) pause(id string) {
	e.t.Helper()
	if r := e.env.Req("POST", "/e2b/sandboxes/"+id+"/pause", map[string]any{}); r.Code != 204 {
		e.t.Fatalf("pause %s: %s", id, r)
	}
}

// The README's rows "a paused sandbox reached by traffic" and "the end a
// resume by traffic gives": a request that may not resume a paused
// sandbox (no traffic token on a private port, no envd token on a secure
// envd) answers E2B's 403 and leaves it paused (E2B's
// TestSandboxWithTrafficAccessTokenAutoResumeViaProxy,
// TestEnvdAccessTokenAutoResumeViaProxy); one that may resumes it with
// E2B's timeout: the create's, at least 300 s, whatever a later timeout
// call set (TestSandboxAutoResume*Timeout*), startedAt being the resume's.
// Seen failing without the protection (the paused refusal off): envd
// without a token answered 401 missing_access_token, not E2B's 403; and
// without autoResume's timeout: endAt - startedAt was 60 s, not 300 s.
func TestE2BAutoResumeByTraffic(t *testing.T) {
	e := newEdge(t)
	denied := "This sandbox can't be resumed with the credentials provided. Check your access token and try again."
	sb := e.create(map[string]any{"templateID": "base", "timeout": 60, "secure": true, "autoPause": true,
		"autoResume": map[string]any{"enabled": true}, "network": map[string]any{"allowPublicTraffic": false}})
	later := e.create(map[string]any{"templateID": "base", "timeout": 420, "autoPause": true, "autoResume": map[string]any{"enabled": true}})
	if r := e.env.Req("POST", "/e2b/sandboxes/"+later.SandboxID+"/timeout", map[string]any{"timeout": 600}); r.Code != 204 {
		t.Fatalf("timeout 600: %s", r)
	}
	e.pause(sb.SandboxID)
	e.pause(later.SandboxID)
	pausedAt := time.Now()

	id := sb.SandboxID
	refusal(t, "a private port of a paused sandbox without its traffic token", e.port(id, 8080), id, denied)
	refusal(t, "a private port of a paused sandbox with a wrong traffic token", e.port(id, 8080, "E2b-Traffic-Access-Token", "abcd"), id, denied)
	refusal(t, "envd of a paused secure sandbox without its envd token", e.hostGet(id, 49983, "/health"), id, denied)
	if d := e.detailOf(id); d.State != "paused" {
		t.Fatalf("after refused requests the sandbox is %s, want paused", d.State)
	}
	if a := e.hostGet(id, 49983, "/health", "X-Access-Token", *sb.EnvdAccessToken); a.code != 204 {
		t.Fatalf("envd /health with the envd token: want 204 once resumed, got %s", a)
	}
	// Not secure: envd is open, and a request resumes it.
	if a := e.hostGet(later.SandboxID, 49983, "/health"); a.code != 204 {
		t.Fatalf("envd /health of an open envd: want 204 once resumed, got %s", a)
	}
	// ±20 s: the resume's start and the end's move are two writes, apart
	// by seconds under load; the wrong rules are 60 s and 600 s.
	for _, c := range []struct {
		id   string
		want float64
	}{{id, 300}, {later.SandboxID, 420}} {
		d := e.detailOf(c.id)
		got := d.EndAt.Sub(d.StartedAt).Seconds()
		if d.State != "running" || math.Abs(got-c.want) > 20 || d.StartedAt.Before(pausedAt.Add(-time.Second)) {
			t.Errorf("sandbox %s resumed by traffic: want running, endAt %v s after a startedAt after the pause (%s), got %s, %.0f s after %s",
				c.id, c.want, pausedAt.Format(time.RFC3339Nano), d.State, got, d.StartedAt.Format(time.RFC3339Nano))
		}
	}
}

// The README's row "timeout and refreshes of a sandbox not running": E2B
// moves the end of a running sandbox only (409 while it pauses or is
// paused, its TestSandboxSetTimeoutPausingSandbox); the native API still
// moves a paused sandbox's end. Seen failing without the check (SetEnd
// for both): the paused sandbox's timeout answered 204.
func TestE2BTimeoutOfPausedSandbox(t *testing.T) {
	e := newEdge(t)
	sb := e.create(map[string]any{"templateID": "base", "timeout": 120, "autoPause": true})
	e.pause(sb.SandboxID)
	for _, c := range []struct{ path, field string }{{"timeout", "timeout"}, {"refreshes", "duration"}} {
		r := e.env.Req("POST", "/e2b/sandboxes/"+sb.SandboxID+"/"+c.path, map[string]any{c.field: 30})
		e.e2bError("POST /"+c.path+" of a paused sandbox", 409, r.Body, "paused")
	}
	if r := e.env.Req("POST", "/sandboxes/"+sb.SandboxID+"/timeout", map[string]any{"timeout": 300}); r.Code/100 != 2 {
		t.Errorf("the native timeout of a paused sandbox: want 2xx, got %s", r)
	}
}

// E2B's resume of a sandbox its timeout paused answers 201 (its
// TestSandboxAutoPausePauseResume): a sandbox that shows as paused may
// still be pausing, which the resume waits out. Seen failing without it:
// a resume right after GET showed paused answered 409 "is paused, not
// paused" (the sandbox was pausing).
func TestE2BResumeAfterAutoPause(t *testing.T) {
	e := newEdge(t)
	sb := e.create(map[string]any{"templateID": "base", "timeout": 120, "autoPause": true})
	if r := e.env.Req("POST", "/e2b/sandboxes/"+sb.SandboxID+"/timeout", map[string]any{"timeout": 0}); r.Code != 204 {
		t.Fatalf("timeout 0: %s", r)
	}
	appenv.Eventually(t, 30*time.Second, func() error {
		if d := e.detailOf(sb.SandboxID); d.State != "paused" {
			return fmt.Errorf("the sandbox is %s, not yet paused by its timeout", d.State)
		}
		return nil
	})
	r := e.env.Req("POST", "/e2b/sandboxes/"+sb.SandboxID+"/resume", map[string]any{})
	if r.Code != 201 {
		t.Fatalf("resume of an auto-paused sandbox: want 201, got %s", r)
	}
	if d := e.detailOf(sb.SandboxID); d.State != "running" {
		t.Errorf("after resume the sandbox is %s", d.State)
	}
}

// GET /e2b/sandboxes (v1) answers newest first, by the start of each
// sandbox's current run, as E2B's does (its TestSandboxListSortedV1): a
// resumed sandbox started when it resumed.
func TestE2BListV1NewestFirst(t *testing.T) {
	e := newEdge(t)
	first := e.create(map[string]any{"templateID": "base", "timeout": 120})
	second := e.create(map[string]any{"templateID": "base", "timeout": 120})
	order := func() []string {
		r := e.env.Req("GET", "/e2b/sandboxes", nil)
		var l []struct {
			SandboxID string    `json:"sandboxID"`
			StartedAt time.Time `json:"startedAt"`
		}
		if r.Code != 200 || json.Unmarshal(r.Body, &l) != nil {
			t.Fatalf("GET /e2b/sandboxes: %s", r)
		}
		var ids []string
		for i, s := range l {
			ids = append(ids, s.SandboxID)
			if i > 0 && !l[i-1].StartedAt.After(s.StartedAt) {
				t.Errorf("v1 list not newest first at %d: %s", i, r.Body)
			}
		}
		return ids
	}
	if got := order(); len(got) != 2 || got[0] != second.SandboxID {
		t.Errorf("v1 list: want [%s %s], got %v", second.SandboxID, first.SandboxID, got)
	}
	e.pause(first.SandboxID)
	if r := e.env.Req("POST", "/e2b/sandboxes/"+first.SandboxID+"/resume", map[string]any{}); r.Code != 201 {
		t.Fatalf("resume: %s", r)
	}
	if got := order(); len(got) != 2 || got[0] != first.SandboxID {
		t.Errorf("v1 list after %s resumed: want it first, got %v", first.SandboxID, got)
	}
}
