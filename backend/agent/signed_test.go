package agent

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdsign"
)

// GET and POST /files take a signed URL instead of the token, as E2B's
// envd does; every other route still needs the token, and a bad, expired
// or missing signature is refused with envd's own messages.
func TestSignedFileURLs(t *testing.T) {
	a := startAgent(t)
	file := filepath.Join(t.TempDir(), "signed.txt")
	do := func(method string, q url.Values, header string, body string) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, a.url+"/files?"+q.Encode(), rd)
		if body != "" {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		if header != "" {
			req.Header.Set(TokenHeader, header)
		}
		res, err := a.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	signedQ := func(op string, exp *int64, token string) url.Values {
		q := url.Values{"path": {file}, "signature": {envdsign.Sign(file, op, "", token, exp)}}
		if exp != nil {
			q.Set("signature_expiration", strconv.FormatInt(*exp, 10))
		}
		return q
	}
	if code, body := do(http.MethodPost, signedQ(envdsign.Write, nil, testToken), "", "hello"); code != http.StatusOK {
		t.Fatalf("signed upload: %d %s", code, body)
	}
	later := time.Now().Add(time.Minute).Unix()
	if code, body := do(http.MethodGet, signedQ(envdsign.Read, &later, testToken), "", ""); code != http.StatusOK || body != "hello" {
		t.Fatalf("signed download: %d %q, want 200 \"hello\"", code, body)
	}
	past := time.Now().Add(-time.Minute).Unix()
	for _, c := range []struct {
		name   string
		method string
		q      url.Values
		header string
		code   int
		msg    string
	}{
		{"no signature", http.MethodGet, url.Values{"path": {file}}, "", 401, "missing signature query parameter"},
		{"another token's", http.MethodGet, signedQ(envdsign.Read, nil, "other"), "", 401, "invalid signature"},
		{"a write signature read", http.MethodGet, signedQ(envdsign.Write, nil, testToken), "", 401, "invalid signature"},
		{"expired", http.MethodGet, signedQ(envdsign.Read, &past, testToken), "", 401, "signature is already expired"},
		{"a wrong header beside a good signature", http.MethodGet, signedQ(envdsign.Read, nil, testToken), "wrong", 401, "access token present in header but does not match"},
		{"a signed upload under another token", http.MethodPost, signedQ(envdsign.Write, nil, "other"), "", 401, "invalid signature"},
	} {
		upload := ""
		if c.method == http.MethodPost {
			upload = "x"
		}
		code, body := do(c.method, c.q, c.header, upload)
		if code != c.code || !strings.Contains(body, `"message":"`+c.msg+`"`) {
			t.Errorf("%s: %d %s, want %d %q", c.name, code, body, c.code, c.msg)
		}
	}
	// The refused upload wrote nothing.
	if _, body := do(http.MethodGet, url.Values{"path": {file}}, testToken, ""); body != "hello" {
		t.Errorf("after refused uploads the file holds %q", body)
	}
	// A signature opens /files only.
	req, _ := http.NewRequest(http.MethodGet, a.url+"/envs?"+signedQ(envdsign.Read, nil, testToken).Encode(), nil)
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/envs with a signature and no token: %d, want 401", res.StatusCode)
	}
}
