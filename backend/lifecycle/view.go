package lifecycle

import (
	"net/url"
	"strconv"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Sandbox is the lifecycle (§1) projection of a record, in the type
// generated from the API document (apitypes), so the server answers exactly
// what the document and the client say.
type Sandbox = apitypes.Sandbox

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// view projects r; base is the backend's external URL (for envdURL and the
// traffic router's service URLs).
func view(r *store.Record, base string) *Sandbox {
	s := &Sandbox{
		SandboxID: r.ID, TemplateID: r.TemplateID, State: string(r.PublicState()), CreatedAt: r.CreatedAt,
		StartedAt: timePtr(r.StartedAt), EndAt: timePtr(r.EndAt), CPUCount: r.CPUCount, MemoryMB: r.MemoryMB,
		Metadata: r.Metadata, AutoPause: r.AutoPause, AutoResume: r.AutoResume, Timeout: r.TimeoutSec, ExitCode: r.ExitCode, RuntimeID: r.RuntimeID, ParentID: r.ParentID,
		EnvdURL: base + "/sandboxes/" + r.ID, ServiceURLs: map[string]apitypes.ServiceURL{},
	}
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	if r.Diagnostic != "" {
		d := r.Diagnostic
		s.Diagnostic = &d
	}
	if len(r.Endpoints) > 0 {
		host, port := routerAddress(base)
		for p := range r.Endpoints {
			s.ServiceURLs[strconv.Itoa(p)] = apitypes.ServiceURL{
				URL: base + "/sandboxes/" + r.ID + "/proxy/" + strconv.Itoa(p) + "/", Host: host, Port: port}
		}
	}
	s.Timeline = make([]apitypes.SandboxTimelineEntry, len(r.Timeline))
	for i, e := range r.Timeline {
		s.Timeline[i] = apitypes.SandboxTimelineEntry{Phase: apitypes.SandboxTimelineEntryPhase(e.Phase), At: e.At, Cause: string(e.Cause)}
	}
	return s
}

// routerAddress is the host and port a client connects to for base: the
// traffic router is this backend, so a sandbox's service URLs have the same
// {url, host, port} shape as a task environment's, with the router's
// address (the port implied by the scheme when base names none).
func routerAddress(base string) (string, int) {
	u, err := url.Parse(base)
	if err != nil {
		return "", 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	return u.Hostname(), port
}
