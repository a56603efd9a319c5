package events

import (
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// View renders e in its public form (API §12, the document's
// LifecycleEvent), also the body of a webhook delivery: E2B's fields
// (version, eventCategory, eventLabel, sandboxTeamId, eventData.
// sandbox_metadata, eventData.execution), so a receiver written for E2B
// reads it unchanged, plus cause and sandboxMetadata. E2B's ids of the run
// and of the template's build: here one execution per sandbox (its id) and
// no builds (the template id).
func View(e *store.Event) apitypes.LifecycleEvent {
	label := e.Type[lastDot(e.Type)+1:]
	return apitypes.LifecycleEvent{Version: "v1", Id: e.ID, Type: e.Type, EventCategory: "lifecycle",
		EventLabel: apitypes.LifecycleEventEventLabel(label), Timestamp: e.At, SandboxId: e.SandboxID,
		SandboxTemplateId: e.TemplateID, SandboxTeamId: e.OrgID, SandboxExecutionId: e.SandboxID,
		SandboxBuildId: e.TemplateID, SandboxMetadata: e.Metadata, Cause: apitypes.LifecycleEventCause(e.Cause),
		EventData: DataView(e.Data)}
}

// DataView renders an event's data (the document's LifecycleEventData).
func DataView(d store.EventData) apitypes.LifecycleEventData {
	v := apitypes.LifecycleEventData{SandboxMetadata: d.SandboxMetadata, ExitCode: d.ExitCode, EndAt: d.EndAt}
	if d.EnvironmentID != "" {
		v.EnvironmentId = &d.EnvironmentID
	}
	if d.KillReason != "" {
		v.KillReason = &d.KillReason
	}
	if x := d.Execution; x != nil {
		v.Execution = &struct {
			ExecutionTime int64     `json:"execution_time"`
			MemoryMb      int       `json:"memory_mb"`
			StartedAt     time.Time `json:"started_at"`
			VcpuCount     int       `json:"vcpu_count"`
		}{ExecutionTime: x.ExecutionTimeMs, MemoryMb: x.MemoryMB, StartedAt: x.StartedAt, VcpuCount: x.VCPUCount}
	}
	return v
}

func lastDot(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

// Types lists every event type, for validating filters and subscriptions.
var Types = func() []string {
	var out []string
	for _, kind := range []string{sandbox.KindRuntime, sandbox.KindTask} {
		for _, l := range sandbox.EventLabels {
			out = append(out, sandbox.EventPrefix(kind)+l)
		}
	}
	return out
}()
