package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Keys made before migration 00011 (the bootstrap ones) keep working after
// it, as full keys named "bootstrap"; revoking one refuses it at once.
func TestKeysFromBeforeMigration11KeepWorking(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		d, driver, dsn := SQLite, "sqlite", "file:"+url
		if strings.HasPrefix(url, "postgres") {
			d, driver, dsn = Postgres, "pgx", url
		}
		old, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newProvider(t, old, d).UpTo(ctx, 10); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixNano()
		for _, q := range []string{`INSERT INTO orgs (id, name, credits_micro, created_at) VALUES ('acme', 'acme', 0, ` + strconv.FormatInt(now, 10) + `)`,
			`INSERT INTO api_keys (hash, org_id, created_at) VALUES ('` + HashSecret("old-bootstrap-key") + `', 'acme', ` + strconv.FormatInt(now, 10) + `)`} {
			if _, err := old.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		old.Close()

		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		a, err := db.Authenticate(ctx, "old-bootstrap-key")
		if err != nil || a.OrgID != "acme" || a.Scope != ScopeFull || a.ID == "" {
			t.Fatalf("the old key after migration: %+v, %v", a, err)
		}
		keys, err := db.APIKeys(ctx, "acme")
		if err != nil || len(keys) != 1 || keys[0].Name != "bootstrap" || keys[0].ID != a.ID {
			t.Fatalf("the org's keys: %v, %v", keys, err)
		}
		if err := db.RevokeAPIKey(ctx, "acme", a.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Authenticate(ctx, "old-bootstrap-key"); !errors.Is(err, ErrKeyRevoked) {
			t.Fatalf("the revoked key: %v, want ErrKeyRevoked", err)
		}
	})
}

// A bootstrap key replaced in the environment stops working (the issue:
// the old and the new key both answered), keys made otherwise stay.
func TestRetireBootstrapKeys(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o, _, err := db.EnsureOrg(ctx, "acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	other := &APIKey{ID: "key_other", OrgID: o.ID, Name: "ci", Scope: ScopeFull}
	if err := db.CreateAPIKey(ctx, other, "dn_key_other_secret"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"first-bootstrap-key", "second-bootstrap-key"} {
		if err := db.EnsureAPIKey(ctx, o.ID, k); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Authenticate(ctx, k); err != nil { // cached now
			t.Fatal(err)
		}
	}
	if n, err := db.RetireBootstrapKeys(ctx, o.ID, "second-bootstrap-key"); err != nil || n != 1 {
		t.Fatalf("retire: %d, %v; want 1", n, err)
	}
	if _, err := db.Authenticate(ctx, "first-bootstrap-key"); !errors.Is(err, ErrKeyRevoked) {
		t.Fatalf("the replaced bootstrap key: %v, want ErrKeyRevoked", err)
	}
	for _, k := range []string{"second-bootstrap-key", "dn_key_other_secret"} {
		if _, err := db.Authenticate(ctx, k); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
}

// A lookup that began before a drop cannot cache what it read.
func TestKeyCacheRefusesAPutFromBeforeADrop(t *testing.T) {
	c := newKeyCache()
	gen := c.generation()
	c.drop("h")
	c.put("h", &keyEntry{loaded: time.Now()}, gen)
	if _, ok := c.get("h"); ok {
		t.Fatal("a put from before the drop was cached")
	}
	c.put("h", &keyEntry{loaded: time.Now()}, c.generation())
	if _, ok := c.get("h"); !ok {
		t.Fatal("a put after the drop was not cached")
	}
}
