package agent

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Forged envelope lengths (issue 34's fuzz) are the client's error:
// invalid_argument naming the envelope, never internal. Seen failing
// without guardEnvelopes: "internal: protocol error: promised 1000 bytes
// in enveloped message, got 26 bytes".
func TestForgedEnvelopeLengths(t *testing.T) {
	env := startAgent(t)
	msg := []byte(`{"process":{"cmd":"true"}}`)
	prefix := func(n uint32) []byte {
		b := make([]byte, 5)
		binary.BigEndian.PutUint32(b[1:], n)
		return b
	}
	send := func(procedure string, body []byte) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, env.url+procedure, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/connect+json")
		req.Header.Set(TokenHeader, testToken)
		res, err := env.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"length past the body", append(prefix(1000), msg...), "short of the message"},
		{"length past the limit", append(prefix(0xffffffff), msg...), "over the"},
		{"truncated prefix", []byte{0, 0, 0}, "5-byte prefix"},
		{"second envelope truncated", append(append(prefix(uint32(len(msg))), msg...), 0, 0, 0, 0, 9, '{'), "short of the message"},
	} {
		for _, procedure := range []string{"/process.Process/Start", "/filesystem.Filesystem/WatchDir"} {
			if b := send(procedure, tc.body); !strings.Contains(b, `"code":"invalid_argument"`) || !strings.Contains(b, tc.want) {
				t.Errorf("%s, %s: want invalid_argument naming %q, got %q", tc.name, procedure, tc.want, b)
			}
		}
	}
	// A well-formed request still runs.
	if b := send("/process.Process/Start", append(prefix(uint32(len(msg))), msg...)); strings.Contains(b, `"error"`) || !strings.Contains(b, `"end"`) {
		t.Errorf("a well-formed start: %q", b)
	}
}
