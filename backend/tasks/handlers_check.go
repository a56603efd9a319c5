package tasks

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

type checkRequest struct {
	Input *string `json:"input"`
	Value *string `json:"value"`
}

// checkInput answers whether a value equals one of the environment's
// resolved inputs, so that a score can be computed without the secret ever
// leaving the backend. Both sides are hashed first: the comparison then
// takes the same time whatever the value's length and content.
func (s *Service) checkInput(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	var req checkRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	switch {
	case req.Input == nil:
		return httpx.Invalid("input", "required: the name of one of the task's inputs")
	case req.Value == nil:
		return httpx.Invalid("value", "required: the value to compare")
	case len(*req.Value) > catalog.MaxInputLen:
		return httpx.Invalid("value", fmt.Sprintf("longer than %d bytes, so no input can equal it", catalog.MaxInputLen))
	}
	want, ok := e.Resolved[*req.Input]
	if !ok {
		name := *req.Input
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		return httpx.Invalid("input", fmt.Sprintf("the environment's task has no input %q", name))
	}
	a, b := sha256.Sum256([]byte(want)), sha256.Sum256([]byte(*req.Value))
	httpx.WriteJSON(w, http.StatusOK, map[string]bool{"match": subtle.ConstantTimeCompare(a[:], b[:]) == 1})
	return nil
}
