package agent

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// trimAfter is how long after its last request ended the agent hands the
// memory it freed back to the kernel. Go returns freed memory only slowly
// (and the heap goal of a busy moment stays until the next GC, which an
// idle agent may not run for minutes), so after a large upload or a
// flood of output the agent would sit on tens of MiB while the sandbox
// is at rest; forced GCs and a scavenge (about a millisecond each for the
// agent's heap) once it is quiet bring it back to what it holds.
var trimAfter = time.Second

// trim collects twice (what sync.Pools hold, the upload buffers, Connect's
// and gzip's, survives one collection) and returns the free pages.
func trim() {
	runtime.GC()
	debug.FreeOSMemory()
}

// idleTrim calls trim trimAfter after the last request ended
// (requests still streaming do not hold it off: they hold little).
type idleTrim struct {
	mu    sync.Mutex
	timer *time.Timer
}

// ended (re)starts the countdown.
func (t *idleTrim) ended() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil {
		t.timer = time.AfterFunc(trimAfter, trim)
		return
	}
	t.timer.Reset(trimAfter)
}

// stop cancels a pending trim.
func (t *idleTrim) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
	}
}
