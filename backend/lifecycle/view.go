package lifecycle

import (
	"strconv"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Sandbox is the lifecycle (§1) projection of a record.
type Sandbox struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	State       string            `json:"state"`
	CreatedAt   time.Time         `json:"createdAt"`
	StartedAt   *time.Time        `json:"startedAt"`
	EndAt       *time.Time        `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	Metadata    map[string]string `json:"metadata"`
	AutoPause   bool              `json:"autoPause"`
	AutoResume  bool              `json:"autoResume"`
	Timeout     int               `json:"timeout"` // seconds, the last lifetime set (create, timeout, connect)
	EnvdURL     string            `json:"envdURL"`
	ServiceURLs map[string]string `json:"serviceURLs"`
	Timeline    []TimelineEntry   `json:"timeline"`
	Diagnostic  *string           `json:"diagnostic"`
	ExitCode    *int              `json:"exitCode,omitempty"`
	RuntimeID   string            `json:"runtimeID,omitempty"`
	AccessToken string            `json:"accessToken,omitempty"`

	// QueuePosition is a queued sandbox's place in its org's queue (1 = next).
	QueuePosition *int `json:"queuePosition,omitempty"`
}

// TimelineEntry is one internal phase with the time it began.
type TimelineEntry struct {
	Phase string    `json:"phase"`
	At    time.Time `json:"at"`
}

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
		SandboxID: r.ID, TemplateID: r.TemplateID, State: r.PublicState(), CreatedAt: r.CreatedAt,
		StartedAt: timePtr(r.StartedAt), EndAt: timePtr(r.EndAt), CPUCount: r.CPUCount, MemoryMB: r.MemoryMB,
		Metadata: r.Metadata, AutoPause: r.AutoPause, AutoResume: r.AutoResume, Timeout: r.TimeoutSec, ExitCode: r.ExitCode, RuntimeID: r.RuntimeID,
		EnvdURL: base + "/sandboxes/" + r.ID, ServiceURLs: map[string]string{},
	}
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	if r.Diagnostic != "" {
		d := r.Diagnostic
		s.Diagnostic = &d
	}
	for port := range r.Endpoints {
		s.ServiceURLs[strconv.Itoa(port)] = base + "/sandboxes/" + r.ID + "/proxy/" + strconv.Itoa(port) + "/"
	}
	s.Timeline = make([]TimelineEntry, len(r.Timeline))
	for i, e := range r.Timeline {
		s.Timeline[i] = TimelineEntry{Phase: e.Phase, At: e.At}
	}
	return s
}

// phasesOf maps a public state name to the phases it projects.
func phasesOf(state string) ([]store.Phase, bool) {
	switch state {
	case "starting":
		return []store.Phase{store.PhaseQueued, store.PhasePending, store.PhaseCreating}, true
	case "running":
		return []store.Phase{store.PhaseRunning, store.PhasePausing}, true
	case "paused":
		return []store.Phase{store.PhasePaused, store.PhaseResuming}, true
	case "deleted":
		return []store.Phase{store.PhaseStopping, store.PhaseDeleted}, true
	case "completed": // stopping records whose process exited are on their way here
		return []store.Phase{store.PhaseCompleted, store.PhaseStopping}, true
	case "failed":
		return []store.Phase{store.PhaseFailed, store.PhaseStopping}, true
	}
	return nil, false
}
