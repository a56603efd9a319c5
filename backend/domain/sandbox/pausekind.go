package sandbox

// PauseKind is how a paused sandbox keeps its state (E2B's pause
// `memory` flag and create's `autoPauseMemory`).
type PauseKind string

const (
	// PauseMemory freezes the sandbox: its processes and memory are kept
	// and resume continues them (Docker: a cgroup freeze, `docker pause`).
	PauseMemory PauseKind = "memory"
	// PauseFilesystem keeps only the filesystem: the instance is stopped,
	// its memory freed, and resume starts it again, its processes from the
	// template's command (Docker: `docker stop` then `docker start`).
	PauseFilesystem PauseKind = "filesystem"
)

// PauseKinds lists every pause kind.
var PauseKinds = []PauseKind{PauseMemory, PauseFilesystem}

// Valid reports whether k is a pause kind.
func (k PauseKind) Valid() bool { return k == PauseMemory || k == PauseFilesystem }

// PauseKindOf is the pause kind of a pause asked with E2B's `memory` flag
// (nil: the default, a memory pause).
func PauseKindOf(memory *bool) PauseKind {
	if memory != nil && !*memory {
		return PauseFilesystem
	}
	return PauseMemory
}

// PauseKindAfter is the pause kind a record carries once it moved to phase
// to, given the kind it carried (a move to pausing carries the kind the
// pause asked for, set by whoever asks for the move). Part of the one
// transition gate (the store applies it to every move): entering pausing
// keeps the asked kind (a memory pause when none was named); pausing,
// paused and resuming keep it, so a resume knows what it resumes from (a
// refused resume, resuming → paused, included); every other phase carries
// none.
func PauseKindAfter(to Phase, kind PauseKind) PauseKind {
	switch to {
	case PhasePausing, PhasePaused, PhaseResuming:
		if !kind.Valid() {
			return PauseMemory
		}
		return kind
	case PhaseQueued, PhasePending, PhaseCreating, PhaseRunning, PhaseStopping, PhaseDeleted, PhaseCompleted, PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return ""
}

// StoppedWhilePaused reports whether an instance that is stopped (exited)
// is what a record in phase p with pause kind k expects: a
// filesystem-only pause stops it on purpose, so the exit is no end.
func StoppedWhilePaused(p Phase, k PauseKind) bool {
	return k == PauseFilesystem && (p == PhasePausing || p == PhasePaused || p == PhaseResuming)
}
