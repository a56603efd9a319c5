// Package ids makes record ids and secrets.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns a 20-character lowercase id: safe in URLs, container names and
// E2B metadata.
func New() string {
	var b [13]byte
	_, _ = rand.Read(b[:])
	return enc.EncodeToString(b[:])[:20]
}

// Token returns a new secret with a prefix naming its kind (e.g. "sbx_at").
func Token(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// Matches compares a presented secret with a stored hash in constant time.
func Matches(secret, hash string) bool {
	if secret == "" || hash == "" {
		return false
	}
	got := HashSecret(strings.TrimSpace(secret))
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

// HashSecret is how every secret (API keys, access and execute tokens) is
// stored: SHA-256 hex. Secrets are random and long, so no salt is needed.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}
