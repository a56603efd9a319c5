// Package taskenv is the domain of a task environment (the TaskEnvironment
// schema of apitypes/openapi.yaml): its states and the one table of the moves between them. It holds no SQL
// and no HTTP; package tasks enforces the table on every change.
package taskenv

// State is a task environment's state, as the API shows it.
type State string

const (
	// StateBuilding: the task's images are being built.
	StateBuilding State = "building"
	// StateProvisioning: the provider is bringing the services up.
	StateProvisioning State = "provisioning"
	// StateReady: reachable; execute, read the instruction.
	StateReady State = "ready"
	// StatePaused: suspended by the user.
	StatePaused State = "paused"
	// StateTornDown: terminated (a delete, its timeout, its ledger record ended).
	StateTornDown State = "torn_down"
	// StateFailed: the build or provision failed, or a service died.
	StateFailed State = "failed"
)

// The sets of states, each defined once.
var (
	// States lists every state, in lifecycle order.
	States = []State{StateBuilding, StateProvisioning, StateReady, StatePaused, StateTornDown, StateFailed}
	// Live states are every state but the terminal ones.
	Live = []State{StateBuilding, StateProvisioning, StateReady, StatePaused}
	// Terminal states end the environment: no move leaves them.
	Terminal = []State{StateTornDown, StateFailed}
	// Transitional states are those the worker owes work, each bounded by
	// the environment's deadline.
	Transitional = []State{StateBuilding, StateProvisioning}
)

// AllowedTransitions is the one table of the moves an environment may make.
// Seed 000: transitions are monotonic (everything flows forward) with one
// exception, paused → ready when a paused environment resumes.
var AllowedTransitions = map[State][]State{
	StateBuilding:     {StateProvisioning, StateFailed, StateTornDown},
	StateProvisioning: {StateReady, StateFailed, StateTornDown},
	// failed from ready or paused: a service the environment needs died.
	StateReady: {StatePaused, StateFailed, StateTornDown},
	// ready from paused: the one move backwards (a resume).
	StatePaused:   {StateReady, StateFailed, StateTornDown},
	StateTornDown: nil,
	StateFailed:   nil,
}

func in(s State, set []State) bool {
	for _, q := range set {
		if s == q {
			return true
		}
	}
	return false
}

// CanTransition reports whether an environment in state from may move to to.
func CanTransition(from, to State) bool { return in(to, AllowedTransitions[from]) }

// Terminal reports whether no further transition can happen.
func (s State) Terminal() bool { return in(s, Terminal) }

// Live reports whether s is not terminal.
func (s State) Live() bool { return in(s, Live) }

// Transitional reports whether the worker owes the environment work.
func (s State) Transitional() bool { return in(s, Transitional) }

// Valid reports whether s is a state at all.
func (s State) Valid() bool { return in(s, States) }
