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

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
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
			`INSERT INTO api_keys (hash, org_id, created_at) VALUES ('` + ids.HashSecret("old-bootstrap-key") + `', 'acme', ` + strconv.FormatInt(now, 10) + `)`} {
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

// MayBeKey answers false only for a key no key that is not revoked has the
// prefix of, and costs at most one load a second however many keys it is
// asked about; a key made on another replica passes it within a second, a
// revoked one stops passing within a second.
func TestMayBeKeyFiltersByKnownPrefixes(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, _, err := a.EnsureOrg(ctx, "acme", 0); err != nil {
			t.Fatal(err)
		}
		before := b.KeyLookups()
		for i := 0; i < 500; i++ {
			if b.MayBeKey(ctx, "dn_key_guess"+strconv.Itoa(i)) {
				t.Fatalf("guess %d may be a key", i)
			}
		}
		if n := b.KeyLookups() - before; n > 2 {
			t.Fatalf("500 guesses cost %d loads, want 1 (2 if a second passed)", n)
		}
		secret := "dn_key_0123456789abcdef0123456789abcdef"
		k := &APIKey{ID: "key_1", OrgID: "acme", Name: "ci", Scope: ScopeFull}
		if err := a.CreateAPIKey(ctx, k, secret); err != nil {
			t.Fatal(err)
		}
		if !a.MayBeKey(ctx, secret) {
			t.Fatal("a key made on this replica does not pass its filter at once")
		}
		within := func(what string, want bool) {
			t.Helper()
			deadline := time.Now().Add(3 * time.Second)
			for b.MayBeKey(ctx, secret) != want {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the other replica's filter still answers %v", what, !want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		within("a key made on another replica", true)
		if err := a.RevokeAPIKey(ctx, "acme", "key_1"); err != nil {
			t.Fatal(err)
		}
		within("a revoked key", false)
	})
}
