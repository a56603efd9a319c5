package e2bapi

import (
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/volumes"
)

// registerVolumes adds E2B's team volume routes, served by the org's
// volumes (API.md §14); nil Config.Volumes leaves them out.
func (e *Edge) registerVolumes(r *mux.Router) {
	if e.cfg.Volumes == nil {
		return
	}
	h := func(f httpx.Handler) http.Handler { return f }
	r.Handle("/volumes", h(e.handleVolumeCreate)).Methods(http.MethodPost)
	r.Handle("/volumes", h(e.handleVolumeList)).Methods(http.MethodGet)
	r.Handle("/volumes/{volumeID}", h(e.handleVolumeGet)).Methods(http.MethodGet)
	r.Handle("/volumes/{volumeID}", h(e.handleVolumeDelete)).Methods(http.MethodDelete)
}

// volumeAndToken is E2B's VolumeAndToken. Its token authorizes E2B's
// volume content routes, which this backend does not serve: it is empty
// (README.md, differences).
func volumeAndToken(v *store.Volume) e2btypes.VolumeAndToken {
	return e2btypes.VolumeAndToken{VolumeID: v.ID, Name: v.Name}
}

func (e *Edge) handleVolumeCreate(w http.ResponseWriter, r *http.Request) error {
	var req e2btypes.NewVolume
	if err := httpx.DecodeLenient(r, &req); err != nil {
		return err
	}
	v, err := e.cfg.Volumes.Create(r.Context(), httpx.Org(r), req.Name)
	var exists *volumes.ErrExists
	if errors.As(err, &exists) {
		// E2B answers a taken name with 400 (its TestVolumeRoundTrip).
		return httpx.NewError(http.StatusBadRequest, "volume_exists", exists.Error())
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, volumeAndToken(v))
	return nil
}

func (e *Edge) handleVolumeList(w http.ResponseWriter, r *http.Request) error {
	vols, err := e.cfg.Volumes.List(r.Context(), httpx.Org(r))
	if err != nil {
		return err
	}
	out := make([]e2btypes.Volume, len(vols))
	for i, v := range vols {
		out[i] = e2btypes.Volume{VolumeID: v.ID, Name: v.Name}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e *Edge) handleVolumeGet(w http.ResponseWriter, r *http.Request) error {
	v, err := e.cfg.Volumes.Get(r.Context(), httpx.Org(r), mux.Vars(r)["volumeID"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, volumeAndToken(v))
	return nil
}

func (e *Edge) handleVolumeDelete(w http.ResponseWriter, r *http.Request) error {
	if err := e.cfg.Volumes.Delete(r.Context(), httpx.Org(r), mux.Vars(r)["volumeID"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
