package ndjson

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// AppendString writes what encoding/json writes for the same string:
// escapes, HTML characters, line separators, invalid UTF-8 and every byte
// value included.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "é", "€", "😀", "\x00", "\x1f", "\b\f\n\r\t", "<&>", "\xff", "\xe2\x82", "\x80", "\"\\", "\u2028", "\u2029", "\x7f"}
	cases := []string{""}
	for b := range 256 {
		cases = append(cases, string([]byte{byte(b)}))
	}
	for range 300 {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, []byte(s)); string(got) != string(want) {
			t.Fatalf("%q: got %s, encoding/json writes %s", s, got, want)
		}
	}
}
