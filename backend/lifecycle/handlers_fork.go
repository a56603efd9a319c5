package lifecycle

import (
	"net/http"
	"sync"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// handleFork is POST /sandboxes/{id}/fork (API.md §14): 201 with one entry
// per fork, each its sandbox (with its access token, shown once) or its
// error envelope.
func (s *Service) handleFork(w http.ResponseWriter, r *http.Request) error {
	var body apitypes.ForkSandbox
	if err := httpx.Decode(r, &body, nil); err != nil {
		return err
	}
	opts := ForkOptions{Count: 1, TimeoutSec: DefaultTimeout, AllowPaused: true}
	if body.Count != nil {
		opts.Count = *body.Count
	}
	if body.Timeout != nil {
		opts.TimeoutSec = max(*body.Timeout, s.cfg.MinTimeout)
	}
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	forks, err := s.Fork(r.Context(), rec, opts)
	if err != nil {
		return err
	}
	base := baseURL(r)
	out := make([]apitypes.ForkResult, len(forks))
	var wg sync.WaitGroup
	for i, f := range forks {
		if f.Err != nil {
			env := httpx.AsError(f.Err).Envelope()
			out[i].Error = &env
			continue
		}
		wg.Go(func() {
			cur := f.Record
			if deref(body.WaitReady) {
				if got, err := s.WaitStarted(r.Context(), cur.ID); err == nil {
					cur = got
				}
			}
			sb := view(cur, base)
			sb.AccessToken = f.AccessToken
			if err := s.withQueuePosition(r.Context(), cur, sb); err != nil {
				env := httpx.AsError(err).Envelope()
				out[i].Error = &env
				return
			}
			out[i].Sandbox = sb
		})
	}
	wg.Wait()
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}
