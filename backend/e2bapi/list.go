package e2bapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// maxListed bounds the live sandboxes one listing reads (an org's live
// sandboxes are bounded by its quota well below this).
const maxListed = 10_000

// listFilter is what E2B's listings filter on.
type listFilter struct {
	metadata     map[string]string
	states       map[string]bool
	template     string
	startedAfter time.Time
}

// metadataFilter parses E2B's metadata query: one URL-encoded query string
// ("user=abc&app=prod", keys and values encoded once more).
func metadataFilter(q url.Values) (map[string]string, error) {
	raw := q.Get("metadata")
	if raw == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, httpx.InvalidQuery("metadata", "must be a URL-encoded query such as user%3Dabc%26app%3Dprod: "+err.Error())
	}
	out := map[string]string{}
	for k, vs := range vals {
		if k == "" || len(vs) == 0 {
			return nil, httpx.InvalidQuery("metadata", fmt.Sprintf("pair %q must look like key=value", k))
		}
		out[k] = vs[len(vs)-1]
	}
	return out, lifecycle.CheckMetadataFilter(out)
}

// live reads the org's live sandboxes matching f, oldest first.
func (e *Edge) live(r *http.Request, f listFilter) ([]*store.Record, error) {
	var out []*store.Record
	var after int64
	for {
		recs, err := e.db.ListRecords(r.Context(), store.RecordFilter{OrgID: httpx.Org(r), Phases: sandbox.Live,
			Kinds: []string{sandbox.KindRuntime, sandbox.KindWorld}, Metadata: f.metadata, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if (f.states == nil || f.states[state(rec)]) && (f.template == "" || rec.TemplateID == f.template) &&
				!startedAt(rec).Before(f.startedAfter) {
				out = append(out, rec)
			}
		}
		if len(recs) < 1000 || len(out) >= maxListed {
			return out, nil
		}
		after = recs[len(recs)-1].Seq
	}
}

// handleListV1 is E2B's deprecated listing: every live sandbox, no paging.
func (e *Edge) handleListV1(w http.ResponseWriter, r *http.Request) error {
	meta, err := metadataFilter(r.URL.Query())
	if err != nil {
		return err
	}
	recs, err := e.live(r, listFilter{metadata: meta})
	if err != nil {
		return err
	}
	// Newest first, as E2B's v1 answers (its TestSandboxListSortedV1).
	slices.SortStableFunc(recs, func(a, b *store.Record) int { return startedAt(b).Compare(startedAt(a)) })
	out := make([]e2btypes.ListedSandbox, len(recs))
	for i, rec := range recs {
		out[i] = e.listed(rec)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// handleListV2 pages E2B's way: sorted by start time (newest first unless
// order=asc), nextToken the opaque position of the last one answered.
func (e *Edge) handleListV2(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := listFilter{template: q.Get("template")}
	var err error
	if f.metadata, err = metadataFilter(q); err != nil {
		return err
	}
	if v := q.Get("state"); v != "" {
		f.states = map[string]bool{}
		for _, s := range strings.Split(v, ",") {
			if s != running && s != paused {
				return httpx.InvalidQuery("state", fmt.Sprintf("unknown state %q; use running, paused or both (state=running,paused)", s))
			}
			f.states[s] = true
		}
	}
	if v := q.Get("startedAfter"); v != "" {
		if f.startedAfter, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return httpx.InvalidQuery("startedAfter", "must be an RFC 3339 time, e.g. 2025-01-02T15:04:05Z")
		}
	}
	asc := false
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		asc = true
	default:
		return httpx.InvalidQuery("order", "must be asc or desc")
	}
	limit := apitypes.ParamE2BListLimitDefault
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < apitypes.ParamE2BListLimitMinimum || limit > apitypes.ParamE2BListLimitMaximum {
			return httpx.InvalidQuery("limit", fmt.Sprintf("must be an integer between %d and %d", apitypes.ParamE2BListLimitMinimum, apitypes.ParamE2BListLimitMaximum))
		}
	}
	recs, err := e.live(r, f)
	if err != nil {
		return err
	}
	less := func(a, b cursor) bool { // a comes before b in the answer
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at) == asc
		}
		return a.id < b.id
	}
	slices.SortFunc(recs, func(a, b *store.Record) int {
		if less(cursorOf(a), cursorOf(b)) {
			return -1
		}
		return 1
	})
	start := 0
	if v := q.Get("nextToken"); v != "" {
		c, err := parseCursor(v)
		if err != nil {
			return err
		}
		start, _ = slices.BinarySearchFunc(recs, c, func(rec *store.Record, c cursor) int {
			if less(c, cursorOf(rec)) {
				return 1
			}
			return -1
		})
	}
	end := min(start+limit, len(recs))
	out := make([]e2btypes.ListedSandbox, 0, end-start)
	nRunning := 0
	for i, rec := range recs {
		if state(rec) == running {
			nRunning++
		}
		if i >= start && i < end {
			out = append(out, e.listed(rec))
		}
	}
	if end < len(recs) {
		w.Header().Set("X-Next-Token", cursorOf(recs[end-1]).String())
	}
	w.Header().Set("X-Total-Running", strconv.Itoa(nRunning))
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// cursor is a position in a v2 listing: a start time and the id after it.
type cursor struct {
	at time.Time
	id string
}

func cursorOf(r *store.Record) cursor { return cursor{at: startedAt(r), id: r.ID} }

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "|" + c.id))
}

func parseCursor(s string) (cursor, error) {
	bad := httpx.InvalidQuery("nextToken", "is not a token from X-Next-Token; restart the listing without it")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	ns, id, ok := strings.Cut(string(raw), "|")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil {
		return cursor{}, bad
	}
	return cursor{at: time.Unix(0, n), id: id}, nil
}
