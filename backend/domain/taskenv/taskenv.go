// Package taskenv is the domain of a task environment (the TaskEnvironment
// schema of apitypes/openapi.yaml): its states, each a projection of the
// environment's ledger record (Of). The record's phase is the one state
// machine (sandbox.AllowedTransitions); this package holds no table of its
// own, no SQL and no HTTP.
package taskenv

import "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"

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
	// Transitional states are those the worker owes work (the record is
	// starting), each bounded by the environment's deadline.
	Transitional = []State{StateBuilding, StateProvisioning}
)

// Of is the state an environment shows: the projection of its ledger
// record's phase (the one state machine, sandbox.AllowedTransitions) with
// that record's kill reason. shown is the state the environment showed
// before (stored with it): while the record is starting it is the
// environment's own sub-step (building, then provisioning).
//
// A stopping record keeps showing what it showed: its end is decided but
// its containers may still run, and an environment reads torn_down or
// failed only once they are gone (the record then ended). Only a record
// that began stopping with nothing shown yet projects by its kill reason.
func Of(p sandbox.Phase, killReason string, shown State) State {
	switch p {
	case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating:
		if shown == StateProvisioning {
			return StateProvisioning
		}
		return StateBuilding
	case sandbox.PhaseRunning, sandbox.PhasePausing:
		return StateReady
	case sandbox.PhasePaused, sandbox.PhaseResuming:
		return StatePaused
	case sandbox.PhaseStopping:
		if shown.Live() {
			return shown
		}
		if killReason == sandbox.KillFailed {
			return StateFailed
		}
		return StateTornDown
	case sandbox.PhaseFailed:
		return StateFailed
	case sandbox.PhaseDeleted, sandbox.PhaseCompleted:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return StateTornDown // deleted, completed
}

func in(s State, set []State) bool {
	for _, q := range set {
		if s == q {
			return true
		}
	}
	return false
}

// Terminal reports whether no further transition can happen.
func (s State) Terminal() bool { return in(s, Terminal) }

// Live reports whether s is not terminal.
func (s State) Live() bool { return in(s, Live) }

// Transitional reports whether the worker owes the environment work.
func (s State) Transitional() bool { return in(s, Transitional) }

// Valid reports whether s is a state at all.
func (s State) Valid() bool { return in(s, States) }
