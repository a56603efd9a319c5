// Package sandbox is the domain of a sandbox record (a compute allocation of
// any kind): its phases, the one table of the moves between them, why a
// move happens, and the projections of a phase onto the lifecycle (§1) and
// ledger (§2) APIs. It holds no SQL and no HTTP: the store enforces the
// table (store.Transition), the services and reconciler ask for moves.
package sandbox

import "slices"

// Phase is the internal state of a sandbox record. The lifecycle and ledger
// APIs project it onto their public states (see PublicState, LedgerState).
type Phase string

const (
	// PhaseQueued waits for admission (quotas, provider capacity; see
	// package admission) before the reconciler may create anything.
	PhaseQueued    Phase = "queued"
	PhasePending   Phase = "pending"
	PhaseCreating  Phase = "creating"
	PhaseRunning   Phase = "running"
	PhasePausing   Phase = "pausing"
	PhasePaused    Phase = "paused"
	PhaseResuming  Phase = "resuming"
	PhaseStopping  Phase = "stopping"
	PhaseDeleted   Phase = "deleted"
	PhaseCompleted Phase = "completed"
	PhaseFailed    Phase = "failed"
)

// The sets of phases, each defined once. Every list of phases elsewhere
// (SQL IN-lists included) is built from these.
var (
	// Phases lists every phase, in lifecycle order.
	Phases = []Phase{PhaseQueued, PhasePending, PhaseCreating, PhaseRunning, PhasePausing, PhasePaused,
		PhaseResuming, PhaseStopping, PhaseDeleted, PhaseCompleted, PhaseFailed}
	// Terminal phases end the record: no move leaves them.
	Terminal = []Phase{PhaseDeleted, PhaseCompleted, PhaseFailed}
	// NonTerminal is every phase a delete may start from.
	NonTerminal = []Phase{PhaseQueued, PhasePending, PhaseCreating, PhaseRunning, PhasePausing, PhasePaused,
		PhaseResuming, PhaseStopping}
	// Live phases are those whose sandbox is, or is still to be, running:
	// every non-terminal phase but stopping, whose stop is already decided
	// (billing ended, every view counts it as ended). A kill for lack of
	// credits and a TTL change apply to these.
	Live = []Phase{PhaseQueued, PhasePending, PhaseCreating, PhaseRunning, PhasePausing, PhasePaused, PhaseResuming}
	// Starting phases have not run yet: queued for admission, or being created.
	Starting = []Phase{PhaseQueued, PhasePending, PhaseCreating}
	// Transitional phases are those the reconciler owes work.
	Transitional = []Phase{PhasePending, PhaseCreating, PhasePausing, PhaseResuming, PhaseStopping}
	// Holding phases hold provider capacity (admission quotas): from the
	// moment a record is admitted until its instance is removed. A queued
	// record holds nothing yet.
	Holding = []Phase{PhasePending, PhaseCreating, PhaseRunning, PhasePausing, PhasePaused, PhaseResuming, PhaseStopping}
)

func in(p Phase, set []Phase) bool {
	for _, q := range set {
		if p == q {
			return true
		}
	}
	return false
}

// Terminal reports whether no further transition can happen.
func (p Phase) Terminal() bool { return in(p, Terminal) }

// Live reports whether p is in Live.
func (p Phase) Live() bool { return in(p, Live) }

// Starting reports whether the record has not run yet: queued for
// admission, or being created.
func (p Phase) Starting() bool { return in(p, Starting) }

// Transitional reports whether the reconciler owes the record work.
func (p Phase) Transitional() bool { return in(p, Transitional) }

// Valid reports whether p is a phase at all.
func (p Phase) Valid() bool { return in(p, Phases) }

// Kinds of compute allocation (§2).
const (
	KindRuntime = "runtime"
	KindTask    = "task"
	KindWorld   = "world"
)

// Kinds lists every kind.
var Kinds = []string{KindRuntime, KindTask, KindWorld}

// The properties of a kind, declared here once rather than as a comparison
// with KindTask wherever they matter.

// AddressedAsSandbox reports whether records of kind are sandboxes to the
// API: found by their id on /sandboxes, the E2B edge, their event and log
// routes and host names. A task environment's records are its services',
// reached only through the environment.
func AddressedAsSandbox(kind string) bool { return kind != KindTask }

// OwnInstance reports whether a record of kind is one instance the
// reconciler's sandbox driver drives, its logs read from the provider. A
// task environment's records are driven by the tasks driver, which keeps
// their logs in the store.
func OwnInstance(kind string) bool { return !slices.Contains(GroupMemberKinds, kind) }

// GroupMemberKinds are the kinds whose records are services of a group
// (OwnInstance false): the store's queries for the sandbox driver (due
// records, live records, expiries) and the E2B edge's counts leave them
// out by this list, not by naming the kind.
var GroupMemberKinds = []string{KindTask}

// Kill reasons recorded when a record ends. A stopping record's kill reason
// names the terminal phase it ends in (see FinalPhase).
const (
	KillDeleted             = "deleted"
	KillTimeout             = "timeout"
	KillCompleted           = "completed"
	KillFailed              = "failed"
	KillInsufficientCredits = "insufficient_credits"
	KillReset               = "reset"
	KillTornDown            = "torn_down"
)

// FinalPhase is the terminal phase a stopping record with killReason ends
// in: its main process's outcome when that is why it stops, deleted for
// every other reason (a delete, a TTL, credits).
func FinalPhase(killReason string) Phase {
	switch killReason {
	case KillCompleted:
		return PhaseCompleted
	case KillFailed:
		return PhaseFailed
	}
	return PhaseDeleted
}
