package keys

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Bad input names its field; a second org of the same name conflicts; a
// key's secret is stored only as its hash and prefix.
func TestServiceValidatesAndNeverStoresTheSecret(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := New(db, nil)
	neg := -1
	past := time.Now().Add(-time.Hour)
	for name, err := range map[string]error{
		"org":     func() error { _, err := s.CreateOrg(ctx, OrgSpec{Name: "Bad Name"}); return err }(),
		"credits": func() error { _, err := s.CreateOrg(ctx, OrgSpec{Name: "a", CreditsMicro: -1}); return err }(),
		"quotas.max_cpu": func() error {
			_, err := s.CreateOrg(ctx, OrgSpec{Name: "a", Quotas: admission.Quotas{MaxCPU: &neg}})
			return err
		}(),
		"name":      func() error { _, _, err := s.CreateKey(ctx, "a", KeySpec{}); return err }(),
		"scope":     func() error { _, _, err := s.CreateKey(ctx, "a", KeySpec{Name: "x", Scope: "admin"}); return err }(),
		"expiresAt": func() error { _, _, err := s.CreateKey(ctx, "a", KeySpec{Name: "x", ExpiresAt: &past}); return err }(),
	} {
		var inv *domain.InvalidError
		if !errors.As(err, &inv) || inv.Field != name {
			t.Errorf("%s: %v, want an invalid-input error naming it", name, err)
		}
	}
	if _, err := s.CreateOrg(ctx, OrgSpec{Name: "acme", CreditsMicro: 5e6}); err != nil {
		t.Fatal(err)
	}
	var conflict *domain.ConflictError
	if _, err := s.CreateOrg(ctx, OrgSpec{Name: "acme"}); !errors.As(err, &conflict) {
		t.Fatalf("acme again: %v, want a conflict", err)
	}
	var notFound *domain.NotFoundError
	if _, _, err := s.CreateKey(ctx, "nobody", KeySpec{Name: "x"}); !errors.As(err, &notFound) {
		t.Fatalf("a key for an unknown org: %v, want not found", err)
	}
	k, secret, err := s.CreateKey(ctx, "acme", KeySpec{Name: "ci", Scope: store.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	var stored int
	if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE hash = ? OR prefix = ? OR name = ? OR id = ?`,
		secret, secret, secret, secret).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the secret is stored in clear (%d rows, %v)", stored, err)
	}
	if k.Prefix == "" || len(k.Prefix) > 12 || secret[:len(k.Prefix)] != k.Prefix {
		t.Fatalf("prefix %q of %q", k.Prefix, secret)
	}
	if err := s.Revoke(ctx, "acme", "key_nosuch"); !errors.As(err, &notFound) {
		t.Fatalf("revoking an unknown key: %v, want not found", err)
	}
}

// A key cannot make a key that outlives it or grants more than it: an
// expiring key's key must expire no later (400 naming expiresAt, saying
// the latest time allowed); a read key's key must be read. The operator
// (no maker) is not bounded. (Seen failing without withinMaker: the
// expiring key made a key without expiry.)
func TestKeyCannotOutliveOrOutrankItsMaker(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := New(db, nil)
	if _, err := s.CreateOrg(ctx, OrgSpec{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC()
	later, earlier := until.Add(time.Nanosecond), until.Add(-time.Minute)
	expiring := &Maker{Scope: store.ScopeFull, ExpiresAt: &until}
	for _, c := range []struct {
		name, field string
		spec        KeySpec
	}{
		{"no expiry from an expiring key", "expiresAt", KeySpec{Name: "x", MadeBy: expiring}},
		{"a later expiry", "expiresAt", KeySpec{Name: "x", ExpiresAt: &later, MadeBy: expiring}},
		{"full from a read key", "scope", KeySpec{Name: "x", MadeBy: &Maker{Scope: store.ScopeRead}}},
		{"full (the default) from a read key", "scope", KeySpec{Name: "x", Scope: "", MadeBy: &Maker{Scope: store.ScopeRead}}},
	} {
		_, _, err := s.CreateKey(ctx, "acme", c.spec)
		var inv *domain.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%s: %v, want an invalid-input error naming %s", c.name, err, c.field)
			continue
		}
		if c.field == "expiresAt" && !strings.Contains(inv.Msg, until.Format(time.RFC3339Nano)) {
			t.Errorf("%s: %q does not say the latest expiry allowed (%s)", c.name, inv.Msg, until.Format(time.RFC3339Nano))
		}
	}
	for name, spec := range map[string]KeySpec{
		"the maker's own expiry":       {Name: "same", ExpiresAt: &until, MadeBy: expiring},
		"an earlier expiry":            {Name: "earlier", ExpiresAt: &earlier, MadeBy: expiring},
		"read from a read key":         {Name: "r", Scope: store.ScopeRead, MadeBy: &Maker{Scope: store.ScopeRead}},
		"no expiry from a lasting key": {Name: "lasting", MadeBy: &Maker{Scope: store.ScopeFull}},
		"no expiry from the operator":  {Name: "op"},
	} {
		if _, _, err := s.CreateKey(ctx, "acme", spec); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
