package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// Signature is E2B's e2b-signature (version v1): the SHA-256 of the secret
// followed by the raw body, base64 without padding.
func Signature(secret string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(secret))
	h.Write(body)
	return strings.TrimRight(base64.StdEncoding.EncodeToString(h.Sum(nil)), "=")
}

// TimestampSignature is webhook-signature ("v1,<base64 HMAC-SHA256>" over
// "<delivery id>.<webhook-timestamp>.<body>", the Standard Webhooks
// scheme): unlike e2b-signature it covers the timestamp, so a receiver can
// refuse a replayed delivery by its age.
func TimestampSignature(secret, deliveryID string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(deliveryID + "." + strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
