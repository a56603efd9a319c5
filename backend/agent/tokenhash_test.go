package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
)

// An agent given only its token's SHA-256 (the Docker provider's way)
// accepts the token and refuses anything else, including no token and
// the hash itself.
func TestTokenSHA256(t *testing.T) {
	sum := sha256.Sum256([]byte("the-token"))
	s := New(Config{TokenSHA256: sum[:]}, sharedReaper())
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for token, want := range map[string]int{"the-token": http.StatusOK, "": http.StatusUnauthorized, "the-tokeN": http.StatusUnauthorized,
		hex.EncodeToString(sum[:]): http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/envs", nil)
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("token %q: %d, want %d", token, res.StatusCode, want)
		}
	}
	if _, err := tokenSHA256("not hex"); err == nil {
		t.Error("a malformed DN_AGENT_TOKEN_SHA256 was accepted")
	}
}
