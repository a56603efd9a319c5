package keys

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Register adds the org's key routes (behind the API-key middleware).
func (s *Service) Register(r *mux.Router) {
	r.Handle("/api/v1/org/{org}/keys", httpx.OrgHandler(s.handleCreateKey)).Methods(http.MethodPost)
	r.Handle("/api/v1/org/{org}/keys", httpx.OrgHandler(s.handleListKeys)).Methods(http.MethodGet)
	r.Handle("/api/v1/org/{org}/keys/{keyID}", httpx.OrgHandler(s.handleRevokeKey)).Methods(http.MethodDelete)
}

// RegisterAdmin adds the operator routes (mounted under /admin, admin key
// only).
func (s *Service) RegisterAdmin(r *mux.Router) {
	r.Handle("/orgs", httpx.Handler(s.handleCreateOrg)).Methods(http.MethodPost)
	r.Handle("/orgs", httpx.Handler(s.handleListOrgs)).Methods(http.MethodGet)
	// The org's keys, for the operator (an org's first key comes from here).
	r.Handle("/orgs/{org}/keys", anyOrg(s.handleCreateKey)).Methods(http.MethodPost)
	r.Handle("/orgs/{org}/keys", anyOrg(s.handleListKeys)).Methods(http.MethodGet)
	r.Handle("/orgs/{org}/keys/{keyID}", anyOrg(s.handleRevokeKey)).Methods(http.MethodDelete)
}

// anyOrg serves an operator route on the org its path names.
func anyOrg(h func(w http.ResponseWriter, r *http.Request, org string) error) httpx.Handler {
	return func(w http.ResponseWriter, r *http.Request) error { return h(w, r, mux.Vars(r)["org"]) }
}

// toJSON is a key as the API shows it: never the secret (the create
// handler adds it, that once).
func toJSON(k *store.APIKey) apitypes.APIKey {
	return apitypes.APIKey{Id: k.ID, Name: k.Name, Prefix: k.Prefix, Scope: apitypes.APIKeyScope(k.Scope), CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, ExpiresAt: k.ExpiresAt}
}

func (s *Service) handleCreateKey(w http.ResponseWriter, r *http.Request, org string) error {
	var req apitypes.CreateAPIKey
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	spec := KeySpec{Name: req.Name, ExpiresAt: req.ExpiresAt}
	if req.Scope != nil {
		spec.Scope = string(*req.Scope)
	}
	if k := httpx.RequestKey(r); k.ID != "" { // an org's key; the operator's routes carry none
		spec.MadeBy = &Maker{Scope: k.Scope, ExpiresAt: k.ExpiresAt}
	}
	k, secret, err := s.CreateKey(r.Context(), org, spec)
	if err != nil {
		return err
	}
	out := toJSON(k)
	out.Key = &secret
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Service) handleListKeys(w http.ResponseWriter, r *http.Request, org string) error {
	keys, err := s.Keys(r.Context(), org)
	if err != nil {
		return err
	}
	out := make([]apitypes.APIKey, len(keys))
	for i, k := range keys {
		out[i] = toJSON(k)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) handleRevokeKey(w http.ResponseWriter, r *http.Request, org string) error {
	if err := s.Revoke(r.Context(), org, mux.Vars(r)["keyID"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleCreateOrg(w http.ResponseWriter, r *http.Request) error {
	var req apitypes.CreateOrg
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	var micro int64
	if req.Credits != nil {
		m, err := billing.MicroFromCredits(*req.Credits)
		if err != nil {
			return httpx.Invalid("credits", err.Error())
		}
		micro = m
	}
	var quotas admission.Quotas
	if req.Quotas != nil {
		quotas = *req.Quotas
	}
	o, err := s.CreateOrg(r.Context(), OrgSpec{Name: req.Org, CreditsMicro: micro, Quotas: quotas})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, apitypes.OrgInfo{Org: o.Name, Credits: billing.Credits(o.CreditsMicro), Quotas: quotas, CreatedAt: o.CreatedAt})
	return nil
}

func (s *Service) handleListOrgs(w http.ResponseWriter, r *http.Request) error {
	orgs, err := s.Orgs(r.Context())
	if err != nil {
		return err
	}
	out := make([]apitypes.OrgInfo, len(orgs))
	for i, o := range orgs {
		q, err := s.Quotas(r.Context(), o.ID)
		if err != nil {
			return err
		}
		out[i] = apitypes.OrgInfo{Org: o.Name, Credits: billing.Credits(o.CreditsMicro), Quotas: q, CreatedAt: o.CreatedAt}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}
