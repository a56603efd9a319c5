package main_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

var secretRE = regexp.MustCompile(`API key \(shown this once; keep it\): (dn_key_[0-9a-f]+)`)

// dn keys create|list|revoke against a real backend: the secret is printed
// once, the list never shows it, a read key cannot make keys, and a
// revoked key is refused.
func TestDNKeys(t *testing.T) {
	b := backendproc.Start(t, backendproc.Options{})
	d := newDN(t, map[string]string{"DREADNODE_API_URL": b.URL, "DREADNODE_API_KEY": b.APIKey, "DREADNODE_ORG": b.Org})

	r := d.must("keys", "create", "reader", "--scope", "read", "--expires", "1h")
	m := secretRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no secret printed: %s", r)
	}
	secret := m[1]
	r = d.must("keys", "list", "--json")
	var keys []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil {
		t.Fatalf("keys list --json: %v: %s", err, r)
	}
	var id string
	for _, k := range keys {
		if _, shown := k["key"]; shown {
			t.Fatalf("keys list shows a secret: %s", r)
		}
		if k["name"] == "reader" && k["scope"] == "read" && k["expiresAt"] != nil {
			id, _ = k["id"].(string)
		}
	}
	if id == "" {
		t.Fatalf("keys list lacks the read key: %s", r)
	}
	reader := d.with("DREADNODE_API_KEY", secret)
	reader.must("keys", "list")
	r = reader.run("keys", "create", "more")
	expect(t, r, 1, r.stderr, "HTTP 403", "read")
	d.must("keys", "revoke", id)
	r = reader.run("keys", "list")
	expect(t, r, 1, r.stderr, "HTTP 401", "revoked")
}
