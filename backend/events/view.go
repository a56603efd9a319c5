package events

import (
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Event is the public form of an event (API §12), also the body of a
// webhook delivery: E2B's fields (version, eventCategory, eventLabel,
// sandboxTeamId, eventData.sandbox_metadata, eventData.execution), so a
// receiver written for E2B reads it unchanged, plus cause and
// sandboxMetadata.
type Event struct {
	Version           string    `json:"version"`
	ID                string    `json:"id"`
	Type              string    `json:"type"`
	EventCategory     string    `json:"eventCategory"`
	EventLabel        string    `json:"eventLabel"`
	Timestamp         time.Time `json:"timestamp"`
	SandboxID         string    `json:"sandboxId"`
	SandboxTemplateID string    `json:"sandboxTemplateId"`
	SandboxTeamID     string    `json:"sandboxTeamId"`
	// E2B's ids of the run and of the template's build: here one
	// execution per sandbox (its id) and no builds (the template id).
	SandboxExecutionID string            `json:"sandboxExecutionId"`
	SandboxBuildID     string            `json:"sandboxBuildId"`
	SandboxMetadata    map[string]string `json:"sandboxMetadata"`
	Cause              sandbox.Cause     `json:"cause"`
	EventData          store.EventData   `json:"eventData"`
}

// View renders e.
func View(e *store.Event) Event {
	label := e.Type[lastDot(e.Type)+1:]
	return Event{Version: "v1", ID: e.ID, Type: e.Type, EventCategory: "lifecycle", EventLabel: label,
		Timestamp: e.At, SandboxID: e.SandboxID, SandboxTemplateID: e.TemplateID, SandboxTeamID: e.OrgID,
		SandboxExecutionID: e.SandboxID, SandboxBuildID: e.TemplateID,
		SandboxMetadata: e.Metadata, Cause: e.Cause, EventData: e.Data}
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
