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
			req, _ := http.NewRequest(http.MethodPost, env.url+procedure, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/connect+json")
			req.Header.Set(TokenHeader, testToken)
			res, err := env.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.Contains(string(b), `"code":"invalid_argument"`) || !strings.Contains(string(b), tc.want) {
				t.Errorf("%s, %s: want invalid_argument naming %q, got %d %q", tc.name, procedure, tc.want, res.StatusCode, b)
			}
		}
	}
	// A well-formed request still runs.
	req, _ := http.NewRequest(http.MethodPost, env.url+"/process.Process/Start", bytes.NewReader(append(prefix(uint32(len(msg))), msg...)))
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set(TokenHeader, testToken)
	res, err := env.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(b), `"error"`) || !strings.Contains(string(b), `"end"`) {
		t.Errorf("a well-formed start: %d %q", res.StatusCode, b)
	}
}
