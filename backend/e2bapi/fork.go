package e2bapi

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
)

// handleFork is E2B's POST /sandboxes/{id}/fork: one checkpoint, count
// sandboxes from it, each answered once it runs (or with why it did not).
// On Docker the checkpoint is the filesystem, not the memory: each fork's
// processes start again from its template's command (README.md).
func (e *Edge) handleFork(w http.ResponseWriter, r *http.Request) error {
	var body e2btypes.SandboxForkRequest
	if err := httpx.DecodeLenient(r, &body); err != nil {
		return err
	}
	count := 1
	if body.Count != nil {
		count = int(*body.Count)
	}
	if count < lifecycle.MinForkCount || count > lifecycle.MaxForkCount {
		return httpx.Invalid("count", fmt.Sprintf("must be between %d and %d", lifecycle.MinForkCount, lifecycle.MaxForkCount))
	}
	timeout := e2bDefaultTimeout
	if body.Timeout != nil {
		timeout = int(*body.Timeout)
	}
	d, err := clampTimeout("timeout", timeout, e.lc.MinTimeout())
	if err != nil {
		return err
	}
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	forks, err := e.lc.Fork(r.Context(), rec, lifecycle.ForkOptions{Count: count, TimeoutSec: int(d.Seconds())})
	if err != nil {
		return err
	}
	out := make([]e2btypes.SandboxForkResult, len(forks))
	var wg sync.WaitGroup
	for i, f := range forks {
		if f.Err != nil {
			out[i].Error = e2bError(f.Err)
			continue
		}
		wg.Go(func() {
			sb, err := e.started(r.Context(), f.Record.ID)
			if err != nil {
				out[i].Error = e2bError(err)
				return
			}
			out[i].Sandbox = &sb
		})
	}
	wg.Wait()
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// e2bError is err as E2B's Error, with the status the native API gives it.
func e2bError(err error) *e2btypes.Error {
	he := httpx.AsError(err)
	typ := he.Type
	return &e2btypes.Error{Code: int32(he.Code), Message: he.Detail, ErrorCode: &typ}
}
