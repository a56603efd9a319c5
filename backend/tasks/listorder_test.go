package tasks

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// The environments list is oldest first by default and with order=asc,
// newest first with order=desc; pages follow the order asked, and the state
// filter applies in either order. Any other order is a 400 naming it.
func TestListOrder(t *testing.T) {
	g := newTaskRig(t)
	var made []string
	for range 5 {
		made = append(made, g.create())
	}
	g.step(made[4]) // one ready, the others building
	list := func(query string, limit int) []string {
		t.Helper()
		var ids []string
		for page := 1; page < 10; page++ {
			code, m := g.do(http.MethodGet, query+"&limit="+strconv.Itoa(limit)+"&page="+strconv.Itoa(page), nil)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %v", query, code, m)
			}
			for _, e := range m["environments"].([]any) {
				ids = append(ids, e.(map[string]any)["id"].(string))
			}
			if m["has_next"] != true {
				return ids
			}
		}
		t.Fatalf("%s never ended", query)
		return nil
	}
	rev := func(ids []string) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[len(ids)-1-i] = id
		}
		return out
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"?state=", made},
		{"?order=asc", made},
		{"?order=desc", rev(made)},
		{"?order=desc&state=building", rev(made[:4])},
		{"?order=asc&state=ready", made[4:]},
	} {
		for _, limit := range []int{1, 2, 100} {
			if got := list(c.query, limit); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("%s (limit %d): %v, want %v", c.query, limit, got, c.want)
			}
		}
	}
	for _, bad := range []string{"?order=DESC", "?order=newest", "?order=%20"} {
		code, m := g.do(http.MethodGet, bad, nil)
		b, _ := json.Marshal(m)
		if code != http.StatusBadRequest || !strings.Contains(string(b), `"order"`) {
			t.Errorf("%s: %d %v, want 400 naming order", bad, code, m)
		}
	}
}
