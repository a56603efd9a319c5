// Package keys serves orgs and their API keys as resources (shared/API.md
// §11): operators create and list orgs; an org creates, lists and revokes
// its keys. A key's secret is shown once, when it is made, and stored only
// as a hash (store/keys.go); authentication and the key cache live in the
// store, so a revocation reaches every replica (store/listen.go).
package keys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Service creates orgs and keys.
type Service struct {
	db  *store.DB
	log *slog.Logger
}

// New returns the service.
func New(db *store.DB, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, log: log}
}

// orgName is what an org may be called: it appears in URL paths.
var orgName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// maxKeyName bounds a key's name.
const maxKeyName = apitypes.CreateAPIKeyNameMaxLength // the document's

// OrgSpec is an org to create.
type OrgSpec struct {
	Name         string
	CreditsMicro int64
	Quotas       admission.Quotas
}

// CreateOrg creates an org with its initial credits and quotas; a conflict
// if it exists already.
func (s *Service) CreateOrg(ctx context.Context, spec OrgSpec) (*store.Org, error) {
	if !orgName.MatchString(spec.Name) {
		return nil, domain.Invalid("org", "must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit")
	}
	if spec.CreditsMicro < 0 || spec.CreditsMicro > billing.MaxBalanceMicro {
		return nil, domain.Invalid("credits", fmt.Sprintf("must be between 0 and %s", billing.Credits(billing.MaxBalanceMicro)))
	}
	for name, v := range map[string]*int{"max_running": spec.Quotas.MaxRunning, "max_cpu": spec.Quotas.MaxCPU, "max_memory_mb": spec.Quotas.MaxMemoryMB} {
		if v != nil && *v < 0 {
			return nil, domain.Invalid("quotas."+name, "must be 0 or more (omit it for unlimited)")
		}
	}
	o, created, err := s.db.EnsureOrg(ctx, spec.Name, spec.CreditsMicro)
	if err != nil {
		return nil, err
	}
	if !created {
		return nil, domain.Conflict(fmt.Sprintf("organization %q exists already; grant it credits with POST /admin/orgs/%s/credits", spec.Name, spec.Name))
	}
	if err := admission.SetQuotas(ctx, s.db, o.ID, spec.Quotas); err != nil {
		return nil, err
	}
	s.log.Info("organization created by an operator", "org", o.Name, "credits", billing.Credits(spec.CreditsMicro).String())
	return o, nil
}

// Orgs lists every org.
func (s *Service) Orgs(ctx context.Context) ([]*store.Org, error) { return s.db.Orgs(ctx) }

// Quotas reads an org's quotas.
func (s *Service) Quotas(ctx context.Context, org string) (admission.Quotas, error) {
	return admission.QuotasOf(ctx, s.db.Reader(), org)
}

// KeySpec is a key to make.
type KeySpec struct {
	Name      string
	Scope     string // "" is full
	ExpiresAt *time.Time
	// MadeBy is the key making this one (nil: the operator, who is not
	// bounded). The new key may not outlive it nor have a wider scope.
	MadeBy *Maker
}

// Maker is the key that makes another: what bounds the key it makes.
type Maker struct {
	Scope     string
	ExpiresAt *time.Time // nil: never
}

// CreateKey makes a key for org and returns it with its secret (shown
// this once; only its hash is kept).
func (s *Service) CreateKey(ctx context.Context, org string, spec KeySpec) (*store.APIKey, string, error) {
	name := strings.TrimSpace(spec.Name)
	if name == "" || len(name) > maxKeyName {
		return nil, "", domain.Invalid("name", fmt.Sprintf("is required: 1 to %d characters saying what the key is for", maxKeyName))
	}
	scope := spec.Scope
	if scope == "" {
		scope = store.ScopeFull
	}
	if scope != store.ScopeFull && scope != store.ScopeRead {
		return nil, "", domain.Invalid("scope", `must be "full" or "read"`)
	}
	if spec.ExpiresAt != nil && !spec.ExpiresAt.After(time.Now()) {
		return nil, "", domain.Invalid("expiresAt", "must be in the future")
	}
	if err := withinMaker(spec.MadeBy, scope, spec.ExpiresAt); err != nil {
		return nil, "", err
	}
	if _, err := s.db.OrgByName(ctx, org); errors.Is(err, store.ErrNotFound) {
		return nil, "", domain.NotFound("organization", org)
	} else if err != nil {
		return nil, "", err
	}
	k := &store.APIKey{ID: "key_" + ids.New(), OrgID: org, Name: name, Scope: scope, ExpiresAt: spec.ExpiresAt}
	secret := ids.Token("dn_key")
	if err := s.db.CreateAPIKey(ctx, k, secret); err != nil {
		return nil, "", err
	}
	s.log.Info("API key created", "org", org, "key", k.ID, "prefix", k.Prefix, "scope", scope)
	return k, secret, nil
}

// withinMaker refuses a key that would outlive, or grant more than, the
// key making it: otherwise a short-lived key could mint a key without
// expiry and so keep its holder in after it expired. Revoking a key does
// not revoke the keys it made (shared/API.md §11 makes no such tie, and
// an org rotating its keys makes the new key with the old one before
// revoking it); expiry bounds them because it is known when they are made.
func withinMaker(m *Maker, scope string, expiresAt *time.Time) error {
	if m == nil {
		return nil
	}
	if m.Scope == store.ScopeRead && scope != store.ScopeRead {
		return domain.Invalid("scope", `must be "read": the key making it has scope "read", and a key cannot grant more than the key that made it`)
	}
	if m.ExpiresAt == nil {
		return nil
	}
	latest := m.ExpiresAt.UTC().Format(time.RFC3339Nano)
	if expiresAt == nil {
		return domain.Invalid("expiresAt", "is required, at "+latest+" or earlier: the key making this one expires then, and a key cannot outlive the key that made it (or make it with a key that does not expire)")
	}
	if expiresAt.After(*m.ExpiresAt) {
		return domain.Invalid("expiresAt", "must be at "+latest+" or earlier: the key making this one expires then, and a key cannot outlive the key that made it (or make it with a key that does not expire)")
	}
	return nil
}

// Keys lists org's keys that still exist (not revoked).
func (s *Service) Keys(ctx context.Context, org string) ([]*store.APIKey, error) {
	return s.db.APIKeys(ctx, org)
}

// Revoke revokes org's key id: refused on this replica at once, on the
// others within a second (PostgreSQL notification).
func (s *Service) Revoke(ctx context.Context, org, id string) error {
	if err := s.db.RevokeAPIKey(ctx, org, id); errors.Is(err, store.ErrNotFound) {
		return domain.NotFound("API key", id)
	} else if err != nil {
		return err
	}
	s.log.Info("API key revoked", "org", org, "key", id)
	return nil
}
