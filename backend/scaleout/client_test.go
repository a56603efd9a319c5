package scaleout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

// view is the part of a sandbox the tests compare across replicas.
type view struct {
	SandboxID  string `json:"sandboxID"`
	State      string `json:"state"`
	Diagnostic string `json:"diagnostic"`
}

// ledgerRecord is the part of a ledger record billing is checked by.
type ledgerRecord struct {
	ID            string  `json:"id"`
	State         string  `json:"state"`
	BilledCredits float64 `json:"billed_credits"`
}

// call sends an authenticated request with a deadline and decodes a 2xx
// JSON answer into v (when not nil).
func call(b *backendproc.Backend, timeout time.Duration, method, path, body string, v any) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	res, err := b.Do(ctx, method, path, r)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode/100 != 2 {
		return res.StatusCode, fmt.Errorf("%s %s on %s: %d %s", method, path, b.URL, res.StatusCode, data)
	}
	if v != nil && len(data) > 0 {
		if err := json.Unmarshal(data, v); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s on %s: %v: %s", method, path, b.URL, err, data)
		}
	}
	return res.StatusCode, nil
}

// create asks b for a sandbox and returns its id once b acknowledged it (201).
func create(b *backendproc.Backend, timeout time.Duration) (string, error) {
	var v view
	code, err := call(b, timeout, http.MethodPost, "/sandboxes", `{"timeout": 600}`, &v)
	if err != nil {
		return "", err
	}
	if code != http.StatusCreated || v.SandboxID == "" {
		return "", fmt.Errorf("create on %s answered %d with id %q", b.URL, code, v.SandboxID)
	}
	return v.SandboxID, nil
}

// get reads one sandbox from b.
func get(t *testing.T, b *backendproc.Backend, id string) view {
	t.Helper()
	var v view
	if _, err := call(b, 10*time.Second, http.MethodGet, "/sandboxes/"+id, "", &v); err != nil {
		t.Fatalf("reading sandbox %s: %v", id, err)
	}
	return v
}

// ledger lists every record of the org through b, all states.
func ledger(t *testing.T, b *backendproc.Backend) []ledgerRecord {
	t.Helper()
	var out []ledgerRecord
	cursor := ""
	for {
		var page struct {
			Items      []ledgerRecord `json:"items"`
			NextCursor *string        `json:"next_cursor"`
		}
		path := "/api/v1/org/" + b.Org + "/sandboxes?state=starting,running,paused,killed&limit=200"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if _, err := call(b, 10*time.Second, http.MethodGet, path, "", &page); err != nil {
			t.Fatalf("reading the ledger: %v", err)
		}
		out = append(out, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return out
		}
		cursor = *page.NextCursor
	}
}

// balance reads the org's settled credit balance through b.
func balance(t *testing.T, b *backendproc.Backend) float64 {
	t.Helper()
	c, err := readBalance(b)
	if err != nil {
		t.Fatalf("reading credits: %v", err)
	}
	return c
}

// readBalance is balance for goroutines other than the test's.
func readBalance(b *backendproc.Backend) (float64, error) {
	var c struct {
		Balance float64 `json:"balance"`
	}
	_, err := call(b, 10*time.Second, http.MethodGet, "/api/v1/org/"+b.Org+"/credits", "", &c)
	return c.Balance, err
}

// settled reports whether a public state is final for a create.
func settled(state string) bool {
	return state == "running" || state == "failed" || state == "deleted" || state == "completed"
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// raw is a sandbox's whole answer (timeline, diagnostic), for failure messages.
func raw(b *backendproc.Backend, id string) string {
	var m map[string]any
	if _, err := call(b, 10*time.Second, http.MethodGet, "/sandboxes/"+id, "", &m); err != nil {
		return err.Error()
	}
	out, _ := json.MarshalIndent(m, "", "  ")
	return string(out)
}
