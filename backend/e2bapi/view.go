package e2bapi

import (
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// sandboxJSON is E2B's Sandbox: the answer to create, resume and connect.
type sandboxJSON struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// listedJSON is E2B's ListedSandbox.
type listedJSON struct {
	TemplateID   string            `json:"templateID"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int               `json:"memoryMB"`
	DiskSizeMB   int               `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []volumeMountJSON `json:"volumeMounts,omitempty"`
}

// detailJSON is E2B's SandboxDetail.
type detailJSON struct {
	listedJSON
	AllowInternetAccess *bool         `json:"allowInternetAccess"`
	Domain              *string       `json:"domain"`
	Network             *networkJSON  `json:"network,omitempty"`
	Lifecycle           lifecycleJSON `json:"lifecycle"`
}

type volumeMountJSON struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// networkJSON is the part of E2B's SandboxNetworkConfig this backend
// enforces; the rest is refused at create.
type networkJSON struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
}

type lifecycleJSON struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// short is E2B's Sandbox. envdToken is answered as envdAccessToken (a
// create without secure answers none, as E2B does); traffic, the same
// access token, as trafficAccessToken: the router needs it on every
// sandbox port (E2B's clients send it as E2b-Traffic-Access-Token).
func (e *Edge) short(r *store.Record, envdToken, traffic string) sandboxJSON {
	d := e.cfg.Domain
	out := sandboxJSON{TemplateID: r.TemplateID, SandboxID: r.ID, ClientID: ClientID, EnvdVersion: e.cfg.EnvdVersion,
		EnvdAccessToken: envdToken, Domain: &d}
	if traffic != "" {
		out.TrafficAccessToken = &traffic
	}
	return out
}

// E2B's two states, spelled as this backend's public states are.
var (
	running = string(sandbox.StateRunning)
	paused  = string(sandbox.StatePaused)
)

// state is E2B's state of a live record: E2B knows only running and
// paused (its create returns once the sandbox runs), so a sandbox still
// starting is running and one pausing or resuming is where it goes.
func state(r *store.Record) string {
	switch r.Phase {
	case sandbox.PhasePaused, sandbox.PhasePausing:
		return paused
	}
	return running
}

func (e *Edge) listed(r *store.Record) listedJSON {
	out := listedJSON{TemplateID: r.TemplateID, SandboxID: r.ID, ClientID: ClientID, StartedAt: startedAt(r), EndAt: r.EndAt,
		CPUCount: r.CPUCount, MemoryMB: r.MemoryMB, Metadata: r.Metadata, State: state(r), EnvdVersion: e.cfg.EnvdVersion}
	if out.EndAt.IsZero() { // auto-paused at expiry: its time ran out then
		out.EndAt = r.LastPausedAt
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	for _, v := range r.Spec.Volumes {
		out.VolumeMounts = append(out.VolumeMounts, volumeMountJSON{Name: v.Name, Path: v.Path})
	}
	return out
}

func (e *Edge) detail(r *store.Record) detailJSON {
	d := e.cfg.Domain
	n := r.Spec.Network
	out := detailJSON{listedJSON: e.listed(r), AllowInternetAccess: n.AllowInternetAccess, Domain: &d,
		Lifecycle: lifecycleJSON{AutoResume: r.AutoResume, OnTimeout: "kill"}}
	if r.AutoPause {
		out.Lifecycle.OnTimeout = "pause"
	}
	if n.AllowPublicTraffic != nil || len(n.AllowOut) > 0 || len(n.DenyOut) > 0 {
		out.Network = &networkJSON{AllowPublicTraffic: n.AllowPublicTraffic, AllowOut: n.AllowOut, DenyOut: n.DenyOut}
	}
	return out
}

// startedAt is when the sandbox started, or was created while it starts.
func startedAt(r *store.Record) time.Time {
	if r.StartedAt.IsZero() {
		return r.CreatedAt
	}
	return r.StartedAt
}
