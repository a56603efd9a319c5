package keys

import (
	"context"
	"errors"
	"path/filepath"
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
