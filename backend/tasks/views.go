package tasks

import (
	"maps"
	"slices"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// taskView renders a catalog entry (GET /tasks, GET /tasks/{ref}) as the
// document's Task; a secret input's default is never shown.
func taskView(t *catalog.Task, latest bool) apitypes.Task {
	inputs := make(map[string]apitypes.TaskInput, len(t.Inputs))
	for k, in := range t.Inputs {
		if in.Secret {
			in.Default = "" // the default flag is the answer: never shown
		}
		inputs[k] = apitypes.TaskInput{Default: in.Default, Description: in.Description, Required: in.Required, Secret: in.Secret}
	}
	v := apitypes.Task{Ref: t.Ref(), Org: t.Org, Name: t.Name, Version: t.Version, Latest: latest, Description: t.Description,
		Instruction: t.Instruction, Inputs: inputs, Expose: nonNil(t.Expose), ExecuteService: t.ExecuteService,
		E2bTemplates: nonNil(t.E2BTemplates), Services: []apitypes.TaskService{},
		Network: apitypes.TaskNetwork{AllowOut: nonNilSlice(t.Network.AllowOut)}}
	for _, s := range t.Services {
		sv := apitypes.TaskService{Name: s.Name, Build: s.Build, Healthcheck: s.Healthcheck, DependsOn: nonNilSlice(s.DependsOn)}
		if s.Port != 0 {
			p := s.Port
			sv.Port = &p
		}
		v.Services = append(v.Services, sv)
	}
	return v
}

// EnvView is the full environment resource, in the type generated from the
// API document (apitypes).
type EnvView = apitypes.TaskEnvironment

// StatusView is the cheap poll.
type StatusView = apitypes.TaskEnvironmentStatus

// serviceURLs are shown while the services exist: ready and paused.
func serviceURLs(e *Env) map[string]apitypes.ServiceURL {
	if e.State != taskenv.StateReady && e.State != taskenv.StatePaused {
		return nil
	}
	out := make(map[string]apitypes.ServiceURL, len(e.ServiceURLs))
	for name, ep := range e.ServiceURLs {
		out[name] = apitypes.ServiceURL{URL: ep.URL, Host: ep.Host, Port: ep.Port}
	}
	return out
}

func timelineView(tl []TimelineEntry) []apitypes.TaskEnvironmentTimelineEntry {
	out := make([]apitypes.TaskEnvironmentTimelineEntry, len(tl))
	for i, e := range tl {
		out[i] = apitypes.TaskEnvironmentTimelineEntry{State: string(e.State), At: e.At, Detail: e.Detail}
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func envView(e *Env) EnvView {
	v := EnvView{ID: e.ID, Org: e.OrgID, Workspace: e.Workspace, TaskRef: e.TaskRef,
		Task:     apitypes.TaskEnvironmentTask{Org: e.TaskOrg, Name: e.TaskName, Version: e.TaskVersion, Ref: e.TaskOrg + "/" + e.TaskName + "@" + e.TaskVersion},
		TaskName: e.TaskName, TaskVersion: e.TaskVersion, State: string(e.State), Inputs: maps.Clone(nonNil(e.Inputs)),
		ResolvedInputs: maps.Clone(nonNil(e.Resolved)), TimeoutSec: e.TimeoutSec, ProjectID: e.ProjectID,
		SecretIDs: nonNilSlice(e.SecretIDs), ServiceURLs: serviceURLs(e), Instruction: strPtr(e.Instruction),
		ExecuteService: e.ExecuteService, ExpiresAt: timePtr(e.ExpiresAt), CreatedAt: e.CreatedAt.UTC(),
		UpdatedAt: e.UpdatedAt.UTC(), Error: strPtr(e.Error), SandboxID: e.RecordID, Timeline: timelineView(e.Timeline)}
	return v
}

// envView is the resource as an org's key may read it: the values of the
// task's secret inputs are left out of inputs and resolved_inputs (their
// names stay in secret_inputs). A task no longer in the catalog cannot say
// which inputs are secret, so then no value is shown.
func (s *Service) envView(e *Env) EnvView {
	v := envView(e)
	task := s.catalog.Exact(e.TaskOrg, e.TaskName, e.TaskVersion)
	secret := func(name string) bool { return task == nil || task.SecretInput(name) }
	v.SecretInputs = []string{}
	for _, m := range []map[string]string{v.Inputs, v.ResolvedInputs} {
		for k := range m {
			if secret(k) {
				delete(m, k)
				if !slices.Contains(v.SecretInputs, k) {
					v.SecretInputs = append(v.SecretInputs, k)
				}
			}
		}
	}
	slices.Sort(v.SecretInputs)
	return v
}

func statusView(e *Env) StatusView {
	return StatusView{ID: e.ID, State: string(e.State), ExpiresAt: timePtr(e.ExpiresAt), ServiceURLs: serviceURLs(e), Error: strPtr(e.Error)}
}

// latestOf marks the highest stable version of each org/name.
func latestOf(tasks []*catalog.Task) map[*catalog.Task]bool {
	best := map[string]*catalog.Task{}
	for _, t := range tasks {
		k := t.Org + "/" + t.Name
		b := best[k]
		if b == nil || better(t, b) {
			best[k] = t
		}
	}
	out := map[*catalog.Task]bool{}
	for _, t := range best {
		out[t] = true
	}
	return out
}

func better(a, b *catalog.Task) bool {
	ap, bp := a.SemVer.Prerelease() != "", b.SemVer.Prerelease() != ""
	if ap != bp {
		return !ap
	}
	return a.SemVer.GreaterThan(b.SemVer)
}
