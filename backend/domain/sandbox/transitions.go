package sandbox

// AllowedTransitions is the one table of the moves a sandbox record may make:
// from → every phase it may go to. A move absent from it is refused by the
// store's gate (store.Transition), whoever asks. Staying in a phase is not a
// move: a field-only update keeps the phase and needs no entry.
//
// Every kind moves through the same table: a task environment's record goes
// pending → creating (its build and provision) → running, and ends through
// stopping like a sandbox's, its end committed only once the provider
// confirmed that everything of it is gone (package tasks' driver).
var AllowedTransitions = map[Phase][]Phase{
	PhaseQueued: {
		PhasePending, // admitted
		// Deleted (or killed for credits) while waiting: nothing exists at
		// the provider, so stopping only ends the record without calling it.
		PhaseStopping,
	},
	PhasePending: {
		PhaseCreating,
		PhaseStopping,
	},
	PhaseCreating: {
		PhaseRunning,
		// The provider refused for want of room (E2B answers 429): the create
		// waits in the admission queue again instead of failing.
		PhaseQueued,
		PhaseStopping, // deleted, killed, failed to create or past its deadline
	},
	PhaseRunning: {
		PhasePausing, // a pause request, or an auto-pause sandbox's TTL
		PhaseStopping,
	},
	PhasePausing: {
		PhasePaused,
		PhaseRunning, // the provider refused the pause: the sandbox still runs
		PhaseStopping,
	},
	PhasePaused: {
		PhaseResuming,
		PhaseStopping,
	},
	PhaseResuming: {
		PhaseRunning,
		PhasePaused, // the provider refused the resume: the sandbox stays paused
		PhaseStopping,
	},
	PhaseStopping: {
		PhaseDeleted,
		// The kill reason picks the end (FinalPhase): a sandbox stopping
		// because its main process exited ends completed or failed, not
		// deleted.
		PhaseCompleted,
		PhaseFailed,
	},
	PhaseDeleted:   nil,
	PhaseCompleted: nil,
	PhaseFailed:    nil,
}

// StartPhases are the phases a record may be created in; every later phase
// is reached through AllowedTransitions, so the timeline of every record
// begins at one of these and every phase it shows was a move the gate
// allowed. The store refuses an insert at any other phase
// (store.InsertRecordTx).
//
//   - queued: a create waiting in the admission queue for room.
//   - pending: a create admitted at once (a task record starts here too).
var StartPhases = []Phase{PhaseQueued, PhasePending}

// CanStartIn reports whether a record may be created in phase p.
func CanStartIn(p Phase) bool { return in(p, StartPhases) }

// CanTransition reports whether a record in phase from may move to phase to.
func CanTransition(from, to Phase) bool {
	return in(to, AllowedTransitions[from])
}

// Cause says why a record changed phase; it is recorded on the timeline
// entry of the move.
type Cause string

const (
	// CauseUser: an API request (create, pause, resume, delete, connect).
	CauseUser Cause = "user"
	// CauseTTL: the record's timeout (endAt) passed.
	CauseTTL Cause = "ttl"
	// CauseCredits: the organization ran out of credits.
	CauseCredits Cause = "credits"
	// CauseReconciler: the reconciler (or the task worker) carrying a
	// transitional phase through: a create, a pause, a stop finishing.
	CauseReconciler Cause = "reconciler"
	// CauseRecovery: start-up recovery finishing what a stopped backend
	// left in progress.
	CauseRecovery Cause = "recovery"
	// CauseProvider: the provider reported it: the instance exited,
	// vanished, or the provider refused a create for want of room.
	CauseProvider Cause = "provider"
	// CauseAdmission: the admission queue admitted a queued create. The
	// queue is neither the user nor the reconciler, and a long wait is
	// worth telling apart on the timeline.
	CauseAdmission Cause = "admission"
)

// Causes lists every cause.
var Causes = []Cause{CauseUser, CauseTTL, CauseCredits, CauseReconciler, CauseRecovery, CauseProvider, CauseAdmission}

// Valid reports whether c is a known cause.
func (c Cause) Valid() bool {
	for _, k := range Causes {
		if c == k {
			return true
		}
	}
	return false
}
