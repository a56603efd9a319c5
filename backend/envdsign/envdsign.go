// Package envdsign signs and checks envd's signed file URLs: GET and POST
// /files without X-Access-Token, authorised by a `signature` (and optional
// `signature_expiration`) query parameter made from the envd access token.
// The scheme is E2B envd's (packages/envd/internal/api/auth.go at 54693ff):
// "v1_" + unpadded base64 of SHA-256("path:operation:username:token[:expiration]"),
// where path and username are the query's own values ("" when absent).
// Both the agent (with its own token) and the traffic router (with an /e2b
// sandbox's derived envd token) check them.
package envdsign

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The operations a signature is for.
const (
	Read  = "read"  // GET /files
	Write = "write" // POST /files
)

// E2B envd's messages, which its clients and tests compare to the byte.
var (
	ErrMissing = errors.New("missing signature query parameter")
	ErrInvalid = errors.New("invalid signature")
	ErrExpired = errors.New("signature is already expired")
)

// Sign is the signature of path for operation as username, made with
// token; exp (Unix seconds) is included when not nil.
func Sign(path, operation, username, token string, exp *int64) string {
	parts := []string{path, operation, username, token}
	if exp != nil {
		parts = append(parts, strconv.FormatInt(*exp, 10))
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, ":")))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// BadParam is a query parameter that does not parse (E2B's envd answers
// it 400 before checking anything).
type BadParam struct{ Name, Value string }

func (e *BadParam) Error() string {
	return fmt.Sprintf("Invalid format for parameter %s: %q is not an integer", e.Name, e.Value)
}

// Operation is the signature operation of a /files method, "" for others.
func Operation(method string) string {
	switch method {
	case "GET":
		return Read
	case "POST":
		return Write
	}
	return ""
}

// Check verifies q's signature for operation against token at now: nil
// when it is valid, ErrMissing, ErrInvalid or ErrExpired (a 401), or a
// *BadParam (a 400). As E2B's envd, the signature is compared before the
// expiry, so a wrong signature reads "invalid signature" whatever its
// expiry.
func Check(q url.Values, operation, token string, now time.Time) error {
	var exp *int64
	if v, ok := q["signature_expiration"]; ok && len(v) > 0 {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return &BadParam{Name: "signature_expiration", Value: v[0]}
		}
		exp = &n
	}
	sig, ok := q["signature"]
	if !ok || len(sig) == 0 {
		return ErrMissing
	}
	want := Sign(q.Get("path"), operation, q.Get("username"), token, exp)
	if subtle.ConstantTimeCompare([]byte(want), []byte(sig[0])) != 1 {
		return ErrInvalid
	}
	if exp != nil && *exp < now.Unix() {
		return ErrExpired
	}
	return nil
}
