package ndjson

import (
	"errors"
	"net/http"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// EndKey ends a stream whose key was revoked or expired (err is
// httpx.KeyEnded's): a last line of type "end" saying so, or, before the
// stream began, the 401 a request with that key now gets.
func (n *Writer) EndKey(err error) error {
	code, reason := "api_key_revoked", "API key revoked"
	if errors.Is(err, httpx.ErrKeyExpired) {
		code, reason = "api_key_expired", "API key expired"
	}
	detail := err.Error() + "; open it again with a valid key of your org (dn keys create makes one)"
	if !n.Started {
		return httpx.NewError(http.StatusUnauthorized, code, detail)
	}
	_ = n.Flush()
	_ = n.Line(Event{Type: TypeEnd, Reason: reason, Detail: detail})
	return nil
}
