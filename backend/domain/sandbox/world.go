package sandbox

// The states of a Worlds job (seed 004's sandbox states, lower-cased as
// every state of the API is): a projection of its world record's phase.
const (
	JobPending    = "pending"    // accepted, waiting for admission or scheduling
	JobCreating   = "creating"   // its container is being provisioned
	JobRunning    = "running"    // its main command runs
	JobCompleted  = "completed"  // the main command exited with code 0
	JobFailed     = "failed"     // a start-up error, or a non-zero exit
	JobTerminated = "terminated" // killed (deleted) or past its timeout
)

// JobStates lists every job state, in lifecycle order.
var JobStates = []string{JobPending, JobCreating, JobRunning, JobCompleted, JobFailed, JobTerminated}

// JobState is the state of a Worlds job whose record is in phase p with
// killReason. A stopping record already shows the state it ends in (its
// main command's outcome, or terminated); its output is kept by the end of
// the stop, so a download waits for a terminal phase (JobEnded).
func JobState(p Phase, killReason string) string {
	switch p {
	case PhaseQueued, PhasePending:
		return JobPending
	case PhaseCreating:
		return JobCreating
	case PhaseRunning, PhasePausing, PhasePaused, PhaseResuming:
		return JobRunning
	case PhaseStopping:
		return JobState(FinalPhase(killReason), killReason)
	case PhaseCompleted:
		return JobCompleted
	case PhaseFailed:
		return JobFailed
	case PhaseDeleted:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return JobTerminated
}

// JobEnded reports whether a job in phase p has ended and its output (if
// any was kept) can be read.
func JobEnded(p Phase) bool { return p.Terminal() }
