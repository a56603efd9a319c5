package sandbox

// State is a public state of the lifecycle API (§1).
type State string

const (
	StateStarting  State = "starting"
	StateRunning   State = "running"
	StatePaused    State = "paused"
	StateDeleted   State = "deleted"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
)

// States lists every public state.
var States = []State{StateStarting, StateRunning, StatePaused, StateCompleted, StateFailed, StateDeleted}

// LiveStates are the public states of a live sandbox.
var LiveStates = []State{StateStarting, StateRunning, StatePaused}

// PublicState is the lifecycle API's (§1) view of a phase.
func (p Phase) PublicState() State {
	switch p {
	case PhaseQueued, PhasePending, PhaseCreating:
		return StateStarting
	case PhaseRunning, PhasePausing:
		return StateRunning
	case PhasePaused, PhaseResuming:
		return StatePaused
	case PhaseStopping, PhaseDeleted:
		return StateDeleted
	case PhaseCompleted:
		return StateCompleted
	case PhaseFailed:
		return StateFailed
	}
	return State(p)
}

// PublicState is the lifecycle API's view of a record in phase p with
// killReason: a record stopping because its main process exited already
// shows where it is going (completed or failed), so no client sees
// "deleted" for a job that is only being cleaned up.
func PublicState(p Phase, killReason string) State {
	if p == PhaseStopping {
		switch killReason {
		case KillCompleted:
			return StateCompleted
		case KillFailed:
			return StateFailed
		}
	}
	return p.PublicState()
}

// PhasesOf maps a public state to the phases it projects. Stopping records
// project onto deleted, completed or failed by their kill reason, so every
// one of those three includes stopping: filter what is read by PublicState.
func PhasesOf(s State) ([]Phase, bool) {
	switch s {
	case StateStarting:
		return Starting, true
	case StateRunning:
		return []Phase{PhaseRunning, PhasePausing}, true
	case StatePaused:
		return []Phase{PhasePaused, PhaseResuming}, true
	case StateDeleted:
		return []Phase{PhaseStopping, PhaseDeleted}, true
	case StateCompleted:
		return []Phase{PhaseCompleted, PhaseStopping}, true
	case StateFailed:
		return []Phase{PhaseFailed, PhaseStopping}, true
	}
	return nil, false
}

// LedgerState is a state of the ledger API (§2).
type LedgerState string

const (
	LedgerStarting LedgerState = "starting"
	LedgerRunning  LedgerState = "running"
	LedgerPaused   LedgerState = "paused"
	LedgerKilled   LedgerState = "killed"
)

// LedgerStates lists every ledger state.
var LedgerStates = []LedgerState{LedgerStarting, LedgerRunning, LedgerPaused, LedgerKilled}

// LedgerState is the ledger API's (§2) view of a phase, as a record of a
// kind not in LedgerStoppingKinds reads it (see LedgerStateOf).
func (p Phase) LedgerState() LedgerState {
	switch p {
	case PhaseQueued, PhasePending, PhaseCreating:
		return LedgerStarting
	case PhaseRunning, PhasePausing:
		return LedgerRunning
	case PhasePaused, PhaseResuming:
		return LedgerPaused
	case PhaseStopping, PhaseDeleted, PhaseCompleted, PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return LedgerKilled
}

// LedgerPhases maps each ledger state to the phases Phase.LedgerState
// projects onto it; listing uses LedgerSelections, which also tells
// stopping records apart by what they are leaving.
func LedgerPhases() map[LedgerState][]Phase {
	m := map[LedgerState][]Phase{}
	for _, p := range Phases {
		m[p.LedgerState()] = append(m[p.LedgerState()], p)
	}
	return m
}
