package tasks

import (
	"context"
	"errors"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// maxIDLen bounds an environment id in an error message: a longer one
// names no environment and is cut so the answer does not echo it whole.
const maxIDLen = 128

// Get reads environment id of org in workspace: not found for unknown ids
// and for other orgs' and workspaces' environments alike, so existence does
// not leak.
func (s *Service) Get(ctx context.Context, org, workspace, id string) (*Env, error) {
	if len(id) > maxIDLen {
		return nil, domain.NotFound("environment", id[:maxIDLen]+"…")
	}
	e, err := s.getOrgEnv(ctx, org, workspace, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.NotFound("environment", id)
	}
	return e, err
}

// ListRequest selects one page of a workspace's environments, oldest first
// (newest first with Desc).
type ListRequest struct {
	Org, Workspace string
	// States keeps environments in one of them; none keeps all.
	States []taskenv.State
	// Offset skips that many; Limit (at least 1) bounds the page.
	Offset, Limit int
	// Desc lists newest first; keep it the same from page to page.
	Desc bool
}

// Page is one page of a listing; HasNext says more follow.
type Page struct {
	Envs    []*Env
	HasNext bool
}

// List reads one page of the workspace's environments.
func (s *Service) List(ctx context.Context, req ListRequest) (Page, error) {
	if req.Limit < 1 || req.Offset < 0 {
		return Page{}, errors.New("tasks: List needs a limit of at least 1 and an offset of at least 0")
	}
	states := make([]string, len(req.States))
	for i, st := range req.States {
		states[i] = string(st)
	}
	envs, err := s.pageEnvs(ctx, req.Org, req.Workspace, states, req.Desc, req.Offset, req.Limit+1)
	if err != nil {
		return Page{}, err
	}
	if len(envs) > req.Limit {
		return Page{Envs: envs[:req.Limit], HasNext: true}, nil
	}
	return Page{Envs: envs}, nil
}
