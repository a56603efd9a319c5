package tasks

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// forkEnv is POST …/environments/{id}/fork: 201 with one entry per fork,
// each its environment (with its execute token, shown once) or its error.
func (s *Service) forkEnv(w http.ResponseWriter, r *http.Request) error {
	org, ws, err := scope(r)
	if err != nil {
		return err
	}
	var body apitypes.ForkTaskEnvironment
	if err := httpx.Decode(r, &body, nil); err != nil {
		return err
	}
	count := 1
	if body.Count != nil {
		count = *body.Count
	}
	forks, err := s.Fork(r.Context(), ForkRequest{Org: org, Workspace: ws, ID: mux.Vars(r)["id"], Count: count})
	if err != nil {
		return err
	}
	out := make([]apitypes.TaskEnvironmentForkResult, len(forks))
	for i, f := range forks {
		if f.Err != nil {
			env := httpx.AsError(f.Err).Envelope()
			out[i].Error = &env
			continue
		}
		v := s.envView(f.Env)
		v.ExecuteToken = f.ExecuteToken
		out[i].Environment = &v
	}
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}
