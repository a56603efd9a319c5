package e2bapi

import (
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// The answers are E2B's shapes, generated from its openapi.yml (e2btypes):
// Sandbox (create, resume, connect), ListedSandbox and SandboxDetail.

// short is E2B's Sandbox. envdToken, the derived envd token of a secure
// sandbox (lifecycle.EnvdToken), is answered as envdAccessToken (a sandbox
// created without secure has none, as on E2B); traffic, the sandbox's
// access token, as trafficAccessToken when the sandbox's traffic is not
// public (allowPublicTraffic false), as E2B answers it: the router then
// needs it on every sandbox port but envd's (E2B's clients send it as
// E2b-Traffic-Access-Token); a public sandbox's ports take no token.
func (e *Edge) short(r *store.Record, envdToken, traffic string) e2btypes.Sandbox {
	d := e.cfg.Domain
	out := e2btypes.Sandbox{TemplateID: r.TemplateID, SandboxID: r.ID, ClientID: ClientID, EnvdVersion: e.cfg.EnvdVersion, Domain: &d,
		Alias: alias(r)}
	if envdToken != "" {
		out.EnvdAccessToken = &envdToken
	}
	if traffic != "" && lifecycle.PrivateTraffic(r) {
		out.TrafficAccessToken = &traffic
	}
	return out
}

// E2B's two states (its SandboxState).
const (
	running = string(e2btypes.Running)
	paused  = string(e2btypes.Paused)
)

// state is E2B's state of a live record: E2B knows only running and
// paused (its create returns once the sandbox runs), so a sandbox still
// starting is running and one pausing or resuming is where it goes.
func state(r *store.Record) string {
	switch r.Phase {
	case sandbox.PhasePaused, sandbox.PhasePausing:
		return paused
	case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhaseRunning, sandbox.PhaseResuming, sandbox.PhaseStopping, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return running
}

func (e *Edge) listed(r *store.Record) e2btypes.ListedSandbox {
	md := e2btypes.SandboxMetadata(r.Metadata)
	if md == nil {
		md = e2btypes.SandboxMetadata{}
	}
	out := e2btypes.ListedSandbox{TemplateID: r.TemplateID, SandboxID: r.ID, ClientID: ClientID, StartedAt: startedAt(r), EndAt: r.EndAt,
		CpuCount: int32(r.CPUCount), MemoryMB: int32(r.MemoryMB), Metadata: &md, State: e2btypes.SandboxState(state(r)), EnvdVersion: e.cfg.EnvdVersion,
		VolumeMounts: volumeMounts(r), Alias: alias(r)}
	if out.EndAt.IsZero() { // auto-paused at expiry: its time ran out then
		out.EndAt = r.LastPausedAt
	}
	return out
}

// alias is E2B's alias of the sandbox's template: templates here are
// named, and the name is what E2B calls the alias ("base").
func alias(r *store.Record) *string {
	a := r.TemplateID
	return &a
}

func volumeMounts(r *store.Record) []e2btypes.SandboxVolumeMount {
	var out []e2btypes.SandboxVolumeMount
	for _, v := range r.Spec.Volumes {
		out = append(out, e2btypes.SandboxVolumeMount{Name: v.Name, Path: v.Path})
	}
	return out
}

func (e *Edge) detail(r *store.Record) e2btypes.SandboxDetail {
	d := e.cfg.Domain
	n := r.Spec.Network
	l := e.listed(r)
	out := e2btypes.SandboxDetail{TemplateID: l.TemplateID, SandboxID: l.SandboxID, ClientID: l.ClientID, StartedAt: l.StartedAt,
		EndAt: l.EndAt, CpuCount: l.CpuCount, MemoryMB: l.MemoryMB, Metadata: l.Metadata, State: l.State, EnvdVersion: l.EnvdVersion,
		VolumeMounts: l.VolumeMounts, AllowInternetAccess: n.AllowInternetAccess, Domain: &d, Alias: l.Alias,
		Lifecycle: &e2btypes.SandboxLifecycle{AutoResume: r.AutoResume, OnTimeout: e2btypes.Kill}}
	if r.AutoPause {
		out.Lifecycle.OnTimeout = e2btypes.Pause
	}
	if n.AllowPublicTraffic != nil || len(n.AllowOut) > 0 || len(n.DenyOut) > 0 || r.Spec.E2BMaskRequestHost != "" {
		out.Network = &e2btypes.SandboxNetworkConfig{AllowPublicTraffic: n.AllowPublicTraffic, AllowOut: n.AllowOut, DenyOut: n.DenyOut}
		if m := r.Spec.E2BMaskRequestHost; m != "" {
			out.Network.MaskRequestHost = &m
		}
	}
	return out
}

// startedAt is when the sandbox last began running (its start, or its
// latest resume, as E2B's startedAt is its current instance's), or when
// it was created while it starts.
func startedAt(r *store.Record) time.Time {
	switch {
	case !r.LastStartedAt.IsZero():
		return r.LastStartedAt
	case !r.StartedAt.IsZero():
		return r.StartedAt
	}
	return r.CreatedAt
}
