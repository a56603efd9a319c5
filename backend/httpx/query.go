package httpx

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Page is a page of a cursor-paged listing (the ledger, runtimes).
type Page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// Limits of the cursor-paged listings, as the document declares them (the
// ListLimit parameter of the ledger and runtimes listings).
const (
	DefaultLimit = apitypes.ParamListLimitDefault
	MaxLimit     = apitypes.ParamListLimitMaximum
)

// Query parses the query string strictly (a malformed one is 400, not
// silently dropped) and rejects parameters outside allowed.
func Query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, InvalidQuery("query", "the query string is malformed: "+err.Error())
	}
	for k := range q {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, InvalidQuery(k, "unknown query parameter; this route takes none")
			}
			return nil, InvalidQuery(k, "unknown query parameter; use "+strings.Join(allowed, ", "))
		}
	}
	return q, nil
}

// SplitValues accepts repeated and comma-separated query values.
func SplitValues(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// Cursors are opaque to clients: base64url of "<kind>:<seq>", where seq is
// the last row of the page. Paging by seq keeps a cursor stable while rows
// are inserted (new rows get larger seqs and appear on later pages).

// EncodeCursor is the cursor after row seq of a listing of kind.
func EncodeCursor(kind string, seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strconv.FormatInt(seq, 10)))
}

// DecodeCursor reads a cursor of kind ("" is the start: 0).
func DecodeCursor(kind, c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), kind+":"); ok {
			if seq, err := strconv.ParseInt(rest, 10, 64); err == nil && seq >= 0 {
				return seq, nil
			}
		}
	}
	return 0, InvalidQuery("cursor", "not a cursor returned as next_cursor by this listing; restart the listing without it")
}

// ParseOrder reads order: "asc" (the default when v is empty) or "desc";
// it reports whether the listing runs newest first.
func ParseOrder(v string) (desc bool, err error) {
	o := apitypes.ListOrder(v)
	if v == "" {
		o = apitypes.ListOrderAsc
	}
	if !o.Valid() {
		return false, InvalidQuery("order", fmt.Sprintf("must be asc (oldest first, the default) or desc (newest first), not %q", v))
	}
	return o == apitypes.ListOrderDesc, nil
}

// CursorKind is the cursor kind of a listing of kind in the order asked:
// a cursor of one order is refused by the other (it would skip or repeat
// records), and asc keeps kind itself so cursors handed out before order
// existed still work.
func CursorKind(kind string, desc bool) string {
	if desc {
		return kind + "-desc"
	}
	return kind
}

// ParseLimit reads limit (1..max, default def).
func ParseLimit(v string, def, maxLimit int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, InvalidQuery("limit", fmt.Sprintf("must be an integer between 1 and %d", maxLimit))
	}
	return n, nil
}

// Paging is what a cursor-paged listing (the ledger, runtimes) reads of its
// query: limit, order and cursor, checked the one way.
type Paging struct {
	Limit    int
	Desc     bool  // newest first
	AfterSeq int64 // the cursor's row (0: from the start)
	kind     string
}

// ParsePaging reads limit (1..MaxLimit, default DefaultLimit), order and
// cursor of a listing whose cursors are of kind (see CursorKind).
func ParsePaging(q url.Values, kind string) (Paging, error) {
	limit, err := ParseLimit(q.Get("limit"), DefaultLimit, MaxLimit)
	if err != nil {
		return Paging{}, err
	}
	desc, err := ParseOrder(q.Get("order"))
	if err != nil {
		return Paging{}, err
	}
	p := Paging{Limit: limit, Desc: desc, kind: CursorKind(kind, desc)}
	if p.AfterSeq, err = DecodeCursor(p.kind, q.Get("cursor")); err != nil {
		return Paging{}, err
	}
	return p, nil
}

// PageOf is the page of items whose last row is last; more says a next
// page exists (its cursor is then set).
func PageOf[T any](p Paging, items []T, last int64, more bool) *Page[T] {
	page := &Page[T]{Items: items}
	if more {
		c := EncodeCursor(p.kind, last)
		page.NextCursor = &c
	}
	return page
}
