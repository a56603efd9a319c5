package tasks

import (
	"net/http"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// checkInput answers whether a value equals one of the environment's
// resolved inputs (Check).
func (s *Service) checkInput(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	var req apitypes.CheckInput
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	match, err := s.Check(e, req)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.CheckResult{Match: match})
	return nil
}
