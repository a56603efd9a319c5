package sandbox

// Event labels: the last part of an event type (API §12). The type is
// EventPrefix(kind) + label, e.g. "sandbox.lifecycle.killed".
const (
	EventCreated   = "created"
	EventUpdated   = "updated"
	EventPaused    = "paused"
	EventResumed   = "resumed"
	EventKilled    = "killed"
	EventCompleted = "completed"
	EventFailed    = "failed"
)

// EventLabels lists every label.
var EventLabels = []string{EventCreated, EventUpdated, EventPaused, EventResumed, EventKilled, EventCompleted, EventFailed}

// EventPrefix is the type prefix of a record kind's events: task records
// back task environments, whose events are environment.lifecycle.*.
func EventPrefix(kind string) string {
	if kind == KindTask {
		return "environment.lifecycle."
	}
	return "sandbox.lifecycle."
}

// Move is what the transition gate knows of one change of a record.
type Move struct {
	From, To Phase // To == "": a field-only update
	// FirstRun: the record had never run before this move.
	FirstRun bool
	// Configured: a field-only update changed what the user configured
	// (the timeout or the metadata).
	Configured bool
}

// EventOf is the one table from a record's changes to its events: the label
// of the event the move produces, or "" for none. An event marks a state
// the user can act on, so transitional phases (queued, pending, creating,
// pausing, resuming, stopping) produce none: a sandbox's history reads
// created → (paused → resumed)* → killed|completed|failed, each exactly once
// per occurrence, whichever way (API, TTL, credits, provider) it came about.
func EventOf(m Move) string {
	if m.To == "" {
		if m.Configured && !m.From.Terminal() {
			return EventUpdated // a new timeout or metadata (E2B's "updated")
		}
		return "" // the reconciler's bookkeeping: endpoints, provider ids, …
	}
	switch m.To {
	case PhaseRunning:
		switch {
		case m.FirstRun:
			// created means "it runs", as on E2B: a create that never runs
			// (deleted while queued, failed to start) has no created event,
			// only its end.
			return EventCreated
		case m.From == PhaseResuming:
			return EventResumed
		}
		// pausing → running: the provider refused the pause; no paused
		// was sent, so nothing changed for the user.
		return ""
	case PhasePaused:
		if m.From == PhasePausing {
			return EventPaused
		}
		return "" // resuming → paused: the resume was refused; it stayed paused
	case PhaseDeleted:
		// Sent when the instance is gone (stopping → deleted), not when the
		// stop is decided, so a receiver may act on "killed" at once; its
		// cause is the one that decided the stop (see the store).
		return EventKilled
	case PhaseCompleted:
		return EventCompleted
	case PhaseFailed:
		return EventFailed
	case PhaseQueued, PhasePending, PhaseCreating, PhasePausing, PhaseResuming, PhaseStopping:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return "" // queued, pending, creating, pausing, resuming, stopping
}
