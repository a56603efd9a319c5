package tasks

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// Check answers whether req's value equals the environment's resolved
// input, so that a score can be computed without the secret ever leaving
// the backend. Both sides are hashed first: the comparison then takes the
// same time whatever the value's length and content.
func (s *Service) Check(e *Env, req apitypes.CheckInput) (bool, error) {
	switch {
	case req.Input == nil:
		return false, domain.Invalid("input", "required: the name of one of the task's inputs")
	case req.Value == nil:
		return false, domain.Invalid("value", "required: the value to compare")
	case len(*req.Value) > catalog.MaxInputLen:
		return false, domain.Invalid("value", fmt.Sprintf("longer than %d bytes, so no input can equal it", catalog.MaxInputLen))
	}
	want, ok := e.Resolved[*req.Input]
	if !ok {
		name := *req.Input
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		return false, domain.Invalid("input", fmt.Sprintf("the environment's task has no input %q", name))
	}
	a, b := sha256.Sum256([]byte(want)), sha256.Sum256([]byte(*req.Value))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1, nil
}
