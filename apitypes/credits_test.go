package apitypes

import (
	"encoding/json"
	"testing"
)

// Credits round-trip exactly between the server's rendering and the
// client's reading, whatever the JSON spelling of the number.
func TestCreditAmountRoundTrip(t *testing.T) {
	for _, c := range []struct {
		json string
		want CreditAmount
		text string
	}{
		{"12.500000", 12_500_000, "12.500000"},
		{"0.000001", 1, "0.000001"},
		{"-3.000000", -3_000_000, "-3.000000"},
		{"100", 100_000_000, "100.000000"},
		{"1e2", 100_000_000, "100.000000"},
		{"9007199254.740993", 9_007_199_254_740_993, "9007199254.740993"}, // beyond a float64's exact integers
		{"0.0000004", 0, "0.000000"},
	} {
		var got CreditAmount
		if err := json.Unmarshal([]byte(c.json), &got); err != nil || got != c.want {
			t.Errorf("%s: got %d (%v), want %d", c.json, got, err, c.want)
			continue
		}
		if b, err := json.Marshal(got); err != nil || string(b) != c.text {
			t.Errorf("%s: marshals as %s (%v), want %s", c.json, b, err, c.text)
		}
	}
	for _, bad := range []string{`"1"`, "true", "1e30"} {
		var got CreditAmount
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s: accepted as %d", bad, got)
		}
	}
}
