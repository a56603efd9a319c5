package lifecycle

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Credentials of ours that the traffic router never forwards into a sandbox
// (the code in it is untrusted):
//   - X-Access-Token, E2b-Traffic-Access-Token and X-API-Key, always;
//   - Authorization, when its credential (after the scheme, e.g. "Bearer ")
//     is ours (ownSecret); an Authorization the sandbox's own application
//     issued passes through;
//   - cookies whose name starts with "dreadnode" (reserved for the backend)
//     or whose value is ours.
//
// Whether a value is ours is decided from the request and the process's
// memory alone, never by looking it up among the keys: a lookup per value
// cost a database query per guessed cookie, and whether a value arrived
// told the sandbox's owner whether it was some organization's key (an
// oracle). A value is ours when it has the form of the secrets this
// backend mints (secretShaped), whether or not any key has it, or is one
// of this request's own credentials, this sandbox's tokens or a key the
// operator configured (OperatorKeys).
const backendCookiePrefix = "dreadnode"

// secretShaped reports whether s has the form of ids.Token, the form of
// every secret this backend mints (API keys dn_key_…, the dev key
// dn_dev_…, access tokens sbx_at_…, environment tokens det_…): a prefix,
// "_", then 48 lower-case hex digits. Known or not, revoked or not, such a
// value is dropped, so what reaches the sandbox says nothing of any key.
func secretShaped(s string) bool {
	const tail = 48
	if len(s) < tail+2 || s[len(s)-tail-1] != '_' {
		return false
	}
	for _, c := range s[len(s)-tail:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	for _, c := range s[:len(s)-tail-1] {
		if c != '_' && c != '-' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// credentialStripper decides, once per request, which headers carry our
// credentials, and returns the function that removes them from the
// outgoing request. It makes no lookup (see above).
func (s *Service) credentialStripper(r *http.Request, rec *store.Record, envdTok string) func(http.Header) {
	presented := []string{r.Header.Get("X-API-Key"), r.Header.Get("X-Access-Token"), r.Header.Get(trafficTokenHeader), envdTok}
	ours := func(secret string) bool {
		secret = strings.TrimSpace(secret)
		if secret == "" {
			return false
		}
		if secretShaped(secret) || ids.Matches(secret, rec.AccessTokenHash) {
			return true
		}
		for _, p := range append(presented, s.cfg.OperatorKeys...) {
			if p = strings.TrimSpace(p); p != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(p)) == 1 {
				return true
			}
		}
		return false
	}
	dropAuth := false
	if a := r.Header.Get("Authorization"); a != "" {
		cred := a
		if scheme, rest, ok := strings.Cut(strings.TrimSpace(a), " "); ok && scheme != "" {
			cred = rest
		}
		dropAuth = ours(cred)
	}
	var keep []*http.Cookie
	// The Cookie header is always rebuilt from the cookies that parsed and
	// passed, never forwarded as sent: net/http's parser skips what it
	// cannot parse (a name that is not a token) and parses nothing at all
	// past 3,000 cookies, and either way the raw header would carry a key
	// the loop below never saw.
	cookiesChanged := len(r.Header.Values("Cookie")) > 0
	for _, c := range r.Cookies() {
		if strings.HasPrefix(strings.ToLower(c.Name), backendCookiePrefix) || ours(c.Value) {
			cookiesChanged = true
			continue
		}
		keep = append(keep, c)
	}
	return func(h http.Header) {
		h.Del("X-Access-Token")
		h.Del(trafficTokenHeader)
		h.Del("X-API-Key")
		if dropAuth {
			h.Del("Authorization")
		}
		if cookiesChanged {
			h.Del("Cookie")
			if len(keep) > 0 {
				parts := make([]string, len(keep))
				for i, c := range keep {
					parts[i] = c.String()
				}
				h.Set("Cookie", strings.Join(parts, "; "))
			}
		}
	}
}
