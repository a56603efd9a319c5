package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
)

// GET /sandboxes lists oldest first by default and newest first with
// order=desc, page by page through X-Next-Token; a token of one order is
// refused by the other.
func TestSandboxListOrder(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	ctx := context.Background()
	org, err := ta.app.DB.OrgByName(ctx, "org1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 7 {
		r := &store.Record{ID: fmt.Sprintf("order%02d", i), OrgID: org.ID, Kind: sandbox.KindWorld, Provider: "docker",
			Phase: sandbox.PhaseDeleted, TemplateID: "base", CreatedAt: time.Now().UTC()}
		if err := storetest.InsertFixture(ctx, ta.app.DB, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	walk := func(order string) ([]string, string) {
		var got []string
		token, first := "", ""
		for range 100 {
			p := "/sandboxes?state=deleted&limit=3" + order
			if token != "" {
				p += "&nextToken=" + url.QueryEscape(token)
			}
			r := ta.req("GET", p, nil)
			var page []map[string]any
			if r.code != http.StatusOK || json.Unmarshal(r.body, &page) != nil {
				t.Fatalf("%s: %d %s", p, r.code, r.body)
			}
			for _, s := range page {
				got = append(got, s["sandboxID"].(string))
			}
			token = r.hdr.Get("X-Next-Token")
			if first == "" {
				first = token
			}
			if token == "" {
				return got, first
			}
		}
		t.Fatal("listing did not end")
		return nil, ""
	}
	asc, ascToken := walk("")
	desc, descToken := walk("&order=desc")
	if strings.Join(asc, ",") != strings.Join(ids, ",") || len(desc) != len(ids) {
		t.Fatalf("oldest first %v, newest first %v; want %v and its reverse", asc, desc, ids)
	}
	for i := range ids {
		if desc[i] != ids[len(ids)-1-i] {
			t.Fatalf("newest first %v, want the reverse of %v", desc, ids)
		}
	}
	for _, p := range []string{
		"/sandboxes?state=deleted&order=desc&nextToken=" + url.QueryEscape(ascToken),
		"/sandboxes?state=deleted&nextToken=" + url.QueryEscape(descToken),
		"/sandboxes?order=up",
	} {
		if r := ta.req("GET", p, nil); r.code != http.StatusBadRequest || !strings.Contains(string(r.body), `"loc":["query","`) {
			t.Fatalf("%s: %d %s, want 400 at a query parameter", p, r.code, r.body)
		}
	}
}
