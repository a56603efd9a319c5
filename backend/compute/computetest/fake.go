// Package computetest is an in-memory compute.Provider for unit tests of
// the code that drives compute (the reconciler's drivers): instances are
// entries in a map, failures and slow creates are set by the test, and no
// engine is involved.
package computetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Fake is an in-memory compute.Provider. The zero value is not usable; call New.
type Fake struct {
	mu        sync.Mutex
	instances map[string]*compute.Instance // by Ref.ID
	seq       int
	errs      map[string]error // by operation: "create", "pause", "resume", "delete", "list"
	calls     map[string]int
	// hold, when set, makes Create wait until it is closed or the create's
	// context ends (a slow engine).
	hold    chan struct{}
	entered chan string // receives the record id of each Create that waits on hold
	logs    string
}

var _ compute.Provider = (*Fake)(nil)

// New returns an empty Fake.
func New() *Fake {
	return &Fake{instances: map[string]*compute.Instance{}, errs: map[string]error{}, calls: map[string]int{},
		entered: make(chan string, 64)}
}

// Fail makes every later call of op ("create", "pause", "resume", "delete",
// "list") return err; nil clears it.
func (f *Fake) Fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, op)
		return
	}
	f.errs[op] = err
}

// Hold makes later Creates wait until Release (or their context ends).
func (f *Fake) Hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = make(chan struct{})
}

// Release lets held Creates go on.
func (f *Fake) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hold != nil {
		close(f.hold)
		f.hold = nil
	}
}

// Entered receives the record id of each Create that started waiting on Hold.
func (f *Fake) Entered() <-chan string { return f.entered }

// SetLogs sets what Logs returns for every instance.
func (f *Fake) SetLogs(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = s
}

// Calls is how many times op was called.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Instances returns a copy of every instance.
func (f *Fake) Instances() []compute.Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]compute.Instance, 0, len(f.instances))
	for _, in := range f.instances {
		out = append(out, *in)
	}
	return out
}

// Put adds an instance as if an earlier process had created it (orphans,
// recovery); it returns its ref.
func (f *Fake) Put(recordID string, status compute.Status) compute.Ref {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.put(recordID, status).Ref
}

// SetStatus changes an instance's status (an exit, a pause behind the backend's back).
func (f *Fake) SetStatus(ref compute.Ref, status compute.Status, exitCode int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.instances[ref.ID]; in != nil {
		in.Status, in.ExitCode = status, exitCode
	}
}

// SetExitReason sets an exited instance's ExitReason, which Get reports
// and List does not (as Docker's List, answered from one list call).
func (f *Fake) SetExitReason(ref compute.Ref, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.instances[ref.ID]; in != nil {
		in.ExitReason = reason
	}
}

// SetEgressDrops sets the packets the host's egress rules dropped from an
// instance, by reason, as List reports them.
func (f *Fake) SetEgressDrops(ref compute.Ref, drops map[string]uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.instances[ref.ID]; in != nil {
		in.EgressDrops = drops
	}
}

// Remove deletes an instance behind the backend's back.
func (f *Fake) Remove(ref compute.Ref) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.instances, ref.ID)
}

func (f *Fake) put(recordID string, status compute.Status) *compute.Instance {
	f.seq++
	in := &compute.Instance{Ref: compute.Ref{ID: fmt.Sprintf("fake-%d", f.seq), Provider: "fake"}, RecordID: recordID,
		Status: status, StartedAt: time.Now(), Endpoints: map[int]compute.Endpoint{}}
	f.instances[in.Ref.ID] = in
	return in
}

// begin counts a call of op and returns the error set for it.
func (f *Fake) begin(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	return f.errs[op]
}

func notFound(op string, ref compute.Ref) error {
	return compute.Errorf(compute.KindNotFound, op, nil, "instance %s not found", ref.ID)
}

// Name is "fake".
func (f *Fake) Name() string { return "fake" }

// Ping always answers.
func (f *Fake) Ping(context.Context) error { return nil }

// Templates offers "base".
func (f *Fake) Templates(context.Context) ([]compute.Template, error) {
	return []compute.Template{{ID: "base"}}, nil
}

// Create adopts the record's instance when one exists (idempotent per
// record, as the interface asks), else makes a running one.
func (f *Fake) Create(ctx context.Context, spec compute.Spec) (compute.Instance, error) {
	if err := f.begin("create"); err != nil {
		return compute.Instance{}, err
	}
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		f.entered <- spec.RecordID
		select {
		case <-hold:
		case <-ctx.Done():
			return compute.Instance{}, compute.Errorf(compute.KindTimeout, "create", ctx.Err(), "create of %s cancelled", spec.RecordID)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.instances {
		if in.RecordID == spec.RecordID {
			return *in, nil
		}
	}
	in := f.put(spec.RecordID, compute.StatusRunning)
	in.OrgID = spec.OrgID
	return *in, nil
}

// Get returns the instance or a not-found error.
func (f *Fake) Get(_ context.Context, ref compute.Ref) (compute.Instance, error) {
	if err := f.begin("get"); err != nil {
		return compute.Instance{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.instances[ref.ID]; in != nil {
		return *in, nil
	}
	return compute.Instance{}, notFound("get", ref)
}

// List returns every instance, without ExitReason (Get has it).
func (f *Fake) List(context.Context) ([]compute.Instance, error) {
	if err := f.begin("list"); err != nil {
		return nil, err
	}
	out := f.Instances()
	for i := range out {
		out[i].ExitReason = ""
	}
	return out, nil
}

// Pause pauses a running instance; a paused one is a conflict.
func (f *Fake) Pause(_ context.Context, ref compute.Ref) error {
	if err := f.begin("pause"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instances[ref.ID]
	switch {
	case in == nil:
		return notFound("pause", ref)
	case in.Status == compute.StatusPaused:
		return compute.Errorf(compute.KindConflict, "pause", nil, "instance %s is already paused", ref.ID)
	}
	in.Status = compute.StatusPaused
	return nil
}

// PauseFilesystem stops a running instance, as Docker's filesystem-only
// pause does (its status reads exited until Resume); a paused one is a
// conflict.
func (f *Fake) PauseFilesystem(_ context.Context, ref compute.Ref) error {
	if err := f.begin("pause"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instances[ref.ID]
	switch {
	case in == nil:
		return notFound("pause", ref)
	case in.Status != compute.StatusRunning:
		return compute.Errorf(compute.KindConflict, "pause", nil, "instance %s is not running", ref.ID)
	}
	in.Status = compute.StatusExited
	return nil
}

// Resume runs a paused instance again.
func (f *Fake) Resume(_ context.Context, ref compute.Ref) (compute.Instance, error) {
	if err := f.begin("resume"); err != nil {
		return compute.Instance{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instances[ref.ID]
	if in == nil {
		return compute.Instance{}, notFound("resume", ref)
	}
	in.Status = compute.StatusRunning
	return *in, nil
}

// Delete removes the instance; a missing one is not an error.
func (f *Fake) Delete(_ context.Context, ref compute.Ref) error {
	if err := f.begin("delete"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.instances, ref.ID)
	return nil
}

// SetTimeout has no provider-side TTL to move.
func (f *Fake) SetTimeout(context.Context, compute.Ref, time.Duration) error { return nil }

// Exec is not supported by the fake.
func (f *Fake) Exec(context.Context, compute.Ref, compute.ExecRequest) (compute.ExecResult, error) {
	return compute.ExecResult{}, compute.Errorf(compute.KindInvalid, "exec", nil, "the fake provider runs no commands")
}

// ReadFile is not supported by the fake.
func (f *Fake) ReadFile(context.Context, compute.Ref, string) ([]byte, error) {
	return nil, compute.Errorf(compute.KindInvalid, "read", nil, "the fake provider has no files")
}

// WriteFile is not supported by the fake.
func (f *Fake) WriteFile(context.Context, compute.Ref, string, []byte) error {
	return compute.Errorf(compute.KindInvalid, "write", nil, "the fake provider has no files")
}

// Logs returns what SetLogs set.
func (f *Fake) Logs(context.Context, compute.Ref) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs, nil
}

// Metrics reports nothing.
func (f *Fake) Metrics(context.Context, compute.Ref) (compute.Metrics, error) {
	return compute.Metrics{}, nil
}
