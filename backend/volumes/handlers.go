package volumes

import (
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Register adds the native volume routes (behind the API-key middleware;
// the org is the key's).
func (s *Service) Register(r *mux.Router) {
	r.Handle("/volumes", httpx.Handler(s.handleCreate)).Methods(http.MethodPost)
	r.Handle("/volumes", httpx.Handler(s.handleList)).Methods(http.MethodGet)
	r.Handle("/volumes/{volumeID}", httpx.Handler(s.handleGet)).Methods(http.MethodGet)
	r.Handle("/volumes/{volumeID}", httpx.Handler(s.handleDelete)).Methods(http.MethodDelete)
}

// View is a volume as the native API shows it.
func View(v *store.Volume) apitypes.Volume {
	out := apitypes.Volume{VolumeID: v.ID, Name: v.Name, CreatedAt: v.CreatedAt, SizeBytes: v.Bytes}
	if !v.BytesAt.IsZero() {
		at := v.BytesAt
		out.SizeMeasuredAt = &at
	}
	return out
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) error {
	var req apitypes.NewVolume
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	v, err := s.Create(r.Context(), httpx.Org(r), req.Name)
	var exists *ErrExists
	if errors.As(err, &exists) {
		return httpx.Conflict(exists.Error())
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, View(v))
	return nil
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) error {
	vols, err := s.List(r.Context(), httpx.Org(r))
	if err != nil {
		return err
	}
	out := make([]apitypes.Volume, len(vols))
	for i, v := range vols {
		out[i] = View(v)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) error {
	v, err := s.Get(r.Context(), httpx.Org(r), mux.Vars(r)["volumeID"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, View(v))
	return nil
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) error {
	if err := s.Delete(r.Context(), httpx.Org(r), mux.Vars(r)["volumeID"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
