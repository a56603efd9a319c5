package agent

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reaper waits for every child of the agent. As PID 1 (or a child
// subreaper) the agent inherits every orphan of the sandbox; a wait for
// any child (wait4(-1)) reaps them, so they never pile up as zombies. The
// same loop reaps the agent's own processes and hands their status to whoever
// started them: a wait per process (exec.Cmd.Wait) would race it.
type Reaper struct {
	mu      sync.Mutex
	waiting map[int]func(syscall.WaitStatus)
	sigs    chan os.Signal
}

// NewReaper starts reaping on SIGCHLD. When subreaper is true the agent asks
// the kernel to hand it the orphans of its descendants (PID 1 gets them anyway).
func NewReaper(subreaper bool) *Reaper {
	if subreaper {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	r := &Reaper{waiting: map[int]func(syscall.WaitStatus){}, sigs: make(chan os.Signal, 1)}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	return r
}

// Start starts a process and calls done with its status once reaped. The
// lock is held across the start so the loop cannot reap the child before
// done is registered.
func (r *Reaper) Start(start func() (int, error), done func(syscall.WaitStatus)) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err != nil {
		return 0, err
	}
	r.waiting[pid] = done
	return pid, nil
}

func (r *Reaper) loop() {
	for range r.sigs {
		r.reapAll()
	}
}

// reapAll reaps every child that has exited (SIGCHLD coalesces).
func (r *Reaper) reapAll() {
	for {
		var st syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &st, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if st.Stopped() || st.Continued() {
			continue
		}
		r.mu.Lock()
		done, ok := r.waiting[pid]
		delete(r.waiting, pid)
		r.mu.Unlock()
		if ok {
			go done(st)
		}
		// else an orphan: reaped, nothing to hand over. (A child of Start
		// cannot be missed: Start holds the lock until it is registered.)
	}
}

// exitCode reads a status the way a shell does: 128+N after signal N.
func exitCode(st syscall.WaitStatus) int {
	if st.Signaled() {
		return 128 + int(st.Signal())
	}
	return st.ExitStatus()
}
