package tasks

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// Admission places an environment's ledger record as every sandbox create
// is placed (shared/API.md §7; package admission's Admitter): pending when
// the org's quotas and the provider's capacity have room for it now, queued
// otherwise. Without it, environments start at once.
type Admission interface {
	// Place sets r's phase (pending or queued) inside the create's
	// transaction; a create that could never fit is a domain error.
	Place(ctx context.Context, tx *sql.Tx, r *store.Record) error
	// Wake asks for a pass over the queue (a create queued, an
	// environment ended and freed its compute).
	Wake()
}

// ServiceDefaulter is implemented by engines that apply default limits to a
// service whose compose file sets none (Docker): admission counts what the
// services will really hold. Other engines count hardening's defaults.
type ServiceDefaulter interface {
	ServiceDefaults() compute.GroupLimits
}

// footprint is what an environment of task holds once it runs, for
// admission and the ledger: the CPUs (rounded up) and the memory in MB
// (rounded up) of all its services together, each service's own limits or
// the engine's defaults. One environment is one record, so it counts as one
// against max_running however many services it has; its CPU and memory
// count every service container.
func (s *Service) footprint(ctx context.Context, task *catalog.Task, resolved map[string]string) (cpus, memMB int, err error) {
	key := footprintKey(task, resolved)
	if f, ok := s.sizes.get(key); ok {
		return f[0], f[1], nil
	}
	cpus, memMB, err = s.measure(ctx, task, resolved)
	if err == nil {
		s.sizes.put(key, [2]int{cpus, memMB})
	}
	return cpus, memMB, err
}

// measure loads task's compose project (milliseconds: footprint keeps what
// it found) and sums its services' limits.
func (s *Service) measure(ctx context.Context, task *catalog.Task, resolved map[string]string) (cpus, memMB int, err error) {
	p, err := task.Project(ctx, "footprint", resolved)
	if err != nil {
		return 0, 0, err
	}
	d := hardening.DefaultServiceLimits
	def := compute.GroupLimits{MemoryBytes: d.MemoryBytes, NanoCPUs: d.NanoCPUs, Pids: d.Pids}
	if sd, ok := s.engine.(ServiceDefaulter); ok {
		def = sd.ServiceDefaults()
	}
	var nano, mem int64
	for _, svc := range p.Services {
		l := serviceLimits(svc, def)
		nano += l.NanoCPUs
		mem += l.MemoryBytes
	}
	return int((nano + 1e9 - 1) / 1e9), int((mem + 1<<20 - 1) >> 20), nil
}

// admissionError words Place's refusal of an environment that could never
// fit for its request: the limit is named, the field is task_ref (what the
// caller chose), not a sandbox's resources.
func admissionError(err error, task *catalog.Task) error {
	var inv *domain.InvalidError
	if errors.As(err, &inv) {
		return domain.Invalid("task_ref", fmt.Sprintf("task %s (all its services together) %s", task.Ref(), inv.Msg))
	}
	return err
}

// place asks admission where rec goes, inside the create's transaction. A
// queued environment has no build deadline yet (its clock starts when it is
// admitted, as a queued sandbox's TTL does), and its record none either:
// the queue reads a queued record's deadline as "not before".
func (s *Service) place(ctx context.Context, tx *sql.Tx, task *catalog.Task, e *Env, rec *store.Record) error {
	if s.cfg.Admission == nil {
		return nil
	}
	if err := s.cfg.Admission.Place(ctx, tx, rec); err != nil {
		return admissionError(err, task)
	}
	if rec.Phase == sandbox.PhaseQueued {
		e.Deadline, rec.PhaseDeadline = time.Time{}, time.Time{}
		e.Timeline[len(e.Timeline)-1].Detail = queuedDetail
	}
	return nil
}

const queuedDetail = "queued: the organization's quotas or the provider's capacity are in use; it builds when room frees up (GET /api/v1/org/{org}/quotas)"

// Admitted is admission's hook for a queued environment's record it
// admitted (now pending): the driver starts it now rather than at its next
// sweep.
func (s *Service) Admitted(r *store.Record) {
	if r.Kind != sandbox.KindTask || r.EnvironmentID == "" {
		return
	}
	s.hub.Notify(r.EnvironmentID)
	s.kick(r.EnvironmentID)
}

// startClock gives an environment admitted from the queue its build
// deadline, counted from now, before its worker starts.
func (s *Service) startClock(ctx context.Context, id string) error {
	deadline := s.now().Add(s.cfg.BuildDeadline)
	_, err := s.apply(ctx, id, change{detail: "admitted: building",
		env:    func(e *Env) { e.Deadline = deadline },
		recMut: func(r *store.Record) { r.PhaseDeadline = deadline }})
	return err
}

// footprints remembers environments' footprints by footprintKey, so a
// create does not load its compose project again (bounded: past
// footprintsLimit it starts afresh).
type footprints struct {
	mu sync.Mutex
	m  map[string][2]int
}

const footprintsLimit = 1024

func (f *footprints) get(key string) ([2]int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[key]
	return v, ok
}

func (f *footprints) put(key string, v [2]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= footprintsLimit {
		f.m = map[string][2]int{}
	}
	f.m[key] = v
}

// footprintKey names one task as the catalog loaded it (a rescan makes a
// new *Task) with its inputs, which compose may interpolate into limits;
// the inputs are hashed, as they may be secrets.
func footprintKey(task *catalog.Task, resolved map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(resolved)) {
		_, _ = fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(resolved[k]), resolved[k])
	}
	return fmt.Sprintf("%p %s %x", task, task.Ref(), h.Sum(nil))
}
