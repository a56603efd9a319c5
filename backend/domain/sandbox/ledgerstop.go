package sandbox

import (
	"slices"
	"time"
)

// A stopping record has decided to end but its provider has not yet
// confirmed that its resources are gone. For the kinds in
// LedgerStoppingKinds (a task environment's containers can take a while to
// remove), the ledger (§2) reads such a record as the state it is leaving,
// so "killed" always means nothing of it is left; other kinds read killed
// from the decision on (their removal is quick).
var LedgerStoppingKinds = []string{KindTask}

// Leaving is what a stopping record reads as in the ledger, known from its
// kind and clocks.
type Leaving int

const (
	LeavingEnded   Leaving = iota + 1 // a kind not in LedgerStoppingKinds: killed
	LeavingStart                      // it never started: starting
	LeavingRunning                    // it last started after it last paused: running
	LeavingPaused                     // it last paused after it last started: paused
)

// Leavings lists every Leaving.
var Leavings = []Leaving{LeavingEnded, LeavingStart, LeavingRunning, LeavingPaused}

// LedgerState is the ledger state a stopping record leaving l reads.
func (l Leaving) LedgerState() LedgerState {
	switch l {
	case LeavingStart:
		return LedgerStarting
	case LeavingRunning:
		return LedgerRunning
	case LeavingPaused:
		return LedgerPaused
	case LeavingEnded:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return LedgerKilled
}

// LeavingOf is what a stopping record of kind reads as, from the last time
// it began running (start or resume) and the last time it paused (zero:
// never). Pausing records still read running, and resuming ones paused,
// which these clocks agree with: each is set on reaching running or paused.
func LeavingOf(kind string, lastStarted, lastPaused time.Time) Leaving {
	switch {
	case !slices.Contains(LedgerStoppingKinds, kind):
		return LeavingEnded
	case lastStarted.IsZero():
		return LeavingStart
	case !lastPaused.IsZero() && !lastPaused.Before(lastStarted):
		return LeavingPaused
	}
	return LeavingRunning
}

// LedgerStateOf is the ledger's view of a record of kind in phase p with
// those clocks: its phase's (Phase.LedgerState), except while stopping.
func LedgerStateOf(kind string, p Phase, lastStarted, lastPaused time.Time) LedgerState {
	if p == PhaseStopping {
		return LeavingOf(kind, lastStarted, lastPaused).LedgerState()
	}
	return p.LedgerState()
}

// LedgerSelection is what a ledger state selects: records in Phases, and
// stopping records leaving one of Stopping.
type LedgerSelection struct {
	Phases   []Phase
	Stopping []Leaving
}

// LedgerSelections maps each ledger state to what it selects, derived from
// Phase.LedgerState and Leaving.LedgerState so listing and reading agree.
func LedgerSelections() map[LedgerState]LedgerSelection {
	m := map[LedgerState]LedgerSelection{}
	for _, p := range Phases {
		if p == PhaseStopping {
			continue
		}
		sel := m[p.LedgerState()]
		sel.Phases = append(sel.Phases, p)
		m[p.LedgerState()] = sel
	}
	for _, l := range Leavings {
		sel := m[l.LedgerState()]
		sel.Stopping = append(sel.Stopping, l)
		m[l.LedgerState()] = sel
	}
	return m
}
