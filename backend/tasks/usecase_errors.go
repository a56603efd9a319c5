package tasks

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
)

// The use cases answer with domain errors (backend/domain); the HTTP edge
// maps them to status codes in one place (httpx.AsError).

// invalidAt refuses the body field at path (names and list indexes, e.g.
// "secret_ids", 3): its parts are kept as given, so an input name with a
// dot in it stays one part.
func invalidAt(msg string, path ...any) error {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = fmt.Sprint(p)
	}
	return &domain.InvalidError{In: domain.InBody, Field: strings.Join(parts, "."), Msg: msg, Path: path}
}

// providerErr is an engine failure as the caller sees it: a refusal the
// engine worded (*compute.ProviderError) is a provider error; anything else
// is the service's own failure.
func providerErr(err error) error {
	var pe *compute.ProviderError
	if errors.As(err, &pe) {
		return &domain.ProviderError{Detail: pe.Error()}
	}
	return err
}
