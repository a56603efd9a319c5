package httpx

import "testing"

// Moved from backend/ledger/rates_test.go with the cursors.
func TestCursorRoundTrip(t *testing.T) {
	c := EncodeCursor("s", 42)
	if seq, err := DecodeCursor("s", c); err != nil || seq != 42 {
		t.Fatalf("%d %v", seq, err)
	}
	for _, bad := range []string{"x", "!!!", EncodeCursor("r", 1), "czotMQ"} {
		if _, err := DecodeCursor("s", bad); err == nil {
			t.Errorf("cursor %q accepted", bad)
		}
	}
}
