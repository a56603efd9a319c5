package httpx

import (
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// Keys must spell a field exactly; map keys are data and any spelling goes;
// values that decode themselves are not looked into.
func TestDecodeRefusesMisCasedKeys(t *testing.T) {
	type inner struct {
		CPUCount int `json:"cpuCount"`
	}
	type Embedded struct {
		Tag string `json:"tag"`
	}
	type body struct {
		Embedded
		TimeoutMs int               `json:"timeoutMs"`
		Env       map[string]string `json:"env"`
		Res       *inner            `json:"resources"`
		List      []inner           `json:"list"`
		ByName    map[string]inner  `json:"byName"`
		At        time.Time         `json:"at"`
		Plain     int
	}
	cases := []struct {
		body string
		loc  []any // nil: accepted
	}{
		{`{"timeoutMs": 1, "env": {"PATH": "/bin", "path": "x"}, "tag": "a", "Plain": 1, "at": "2026-01-02T03:04:05Z"}`, nil},
		{`{"timeoutMS": 1}`, []any{"body", "timeoutMS"}},
		{`{"TAG": "a"}`, []any{"body", "TAG"}},
		{`{"plain": 1}`, []any{"body", "plain"}},
		{`{"resources": {"CpuCount": 1}}`, []any{"body", "resources", "CpuCount"}},
		{`{"list": [{"cpuCount": 1}, {"cpucount": 2}]}`, []any{"body", "list", "1", "cpucount"}},
		{`{"byName": {"A": {"CPUcount": 1}}}`, []any{"body", "byName", "A", "CPUcount"}},
		{`{"timeoutMs": 1, "timeoutMS": 2}`, []any{"body", "timeoutMS"}},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
		var v body
		err := Decode(r, &v, nil)
		if c.loc == nil {
			if err != nil {
				t.Errorf("%s: %v", c.body, err)
			}
			continue
		}
		var e *Error
		ok := errors.As(err, &e)
		if !ok || e.Code != 400 || e.Type != "unknown_field" || len(e.Errors) != 1 || !slices.Equal(e.Errors[0].Loc, c.loc) {
			t.Errorf("%s: got %#v, want a 400 at %v", c.body, err, c.loc)
		}
	}
	// Lenient decoding (the E2B edge) keeps encoding/json's matching.
	var v body
	if err := DecodeLenient(httptest.NewRequest("POST", "/", strings.NewReader(`{"timeoutMS": 7}`)), &v); err != nil || v.TimeoutMs != 7 {
		t.Fatalf("lenient: %v %d", err, v.TimeoutMs)
	}
}
