// Package worlds serves Worlds jobs (API.md §16), the third kind of compute
// of seed 001's ledger: a sandbox record of kind world that runs one
// command to completion and keeps the files it leaves in its output
// directory. A job is its record: its id is the record's, its state a
// projection of the record's phase (sandbox.JobState), and the lifecycle
// service creates, admits, bills and stops it like any sandbox; the
// reconciler keeps the output (store.Spec.OutputDir) before it removes the
// container.
package worlds

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Defaults of a job's request.
const (
	DefaultTimeout   = 3600 // seconds
	DefaultOutputDir = "/output"
)

// Sandboxes is what jobs need of the lifecycle service.
type Sandboxes interface {
	Create(ctx context.Context, orgID string, spec lifecycle.Spec, opts lifecycle.CreateOptions) (lifecycle.Created, error)
	Delete(ctx context.Context, r *store.Record, reason string) (*store.Record, error)
	Logs(ctx context.Context, rec *store.Record) ([]string, error)
	WaitEnded(ctx context.Context, id string) (*store.Record, error)
}

// Service is the Worlds jobs service.
type Service struct {
	db *store.DB
	lc Sandboxes
}

// New returns the Service.
func New(db *store.DB, lc Sandboxes) *Service { return &Service{db: db, lc: lc} }

// Job is the JSON of a job (the document's WorldJob).
type Job = apitypes.WorldJob

// NewJob is a job's request (the document's NewWorldJob).
type NewJob = apitypes.NewWorldJob

// Start validates req and creates the job's record; it returns at once.
// replayed says an earlier request with the same idempotency key made it.
func (s *Service) Start(ctx context.Context, org string, req NewJob, idempotencyKey string) (Job, bool, error) {
	spec, err := specOf(req)
	if err != nil {
		return Job{}, false, err
	}
	c, err := s.lc.Create(ctx, org, spec, lifecycle.CreateOptions{Kind: sandbox.KindWorld, IdempotencyKey: idempotencyKey})
	if err != nil {
		return Job{}, false, err
	}
	if c.Replayed && c.Record.Kind != sandbox.KindWorld {
		return Job{}, false, domain.Invalid("Idempotency-Key", "was used by a create of another kind; use a key of its own")
	}
	return s.view(ctx, c.Record), c.Replayed, nil
}

// specOf turns a request into the sandbox it runs, checking what the
// lifecycle does not (the command and the output directory) and naming
// this request's fields in every error.
func specOf(req NewJob) (lifecycle.Spec, error) {
	if len(req.Command) < apitypes.NewWorldJobCommandMinItems || len(req.Command) > apitypes.NewWorldJobCommandMaxItems {
		return lifecycle.Spec{}, domain.Invalid("command", fmt.Sprintf("must hold between %d and %d words", apitypes.NewWorldJobCommandMinItems, apitypes.NewWorldJobCommandMaxItems))
	}
	for i, w := range req.Command {
		if len(w) > apitypes.NewWorldJobCommandItemsMaxLength || strings.ContainsRune(w, 0) {
			return lifecycle.Spec{}, domain.Invalid(fmt.Sprintf("command.%d", i), fmt.Sprintf("must be at most %d bytes, without NUL", apitypes.NewWorldJobCommandItemsMaxLength))
		}
	}
	if req.Command[0] == "" {
		return lifecycle.Spec{}, domain.Invalid("command.0", "must name the program to run")
	}
	out := DefaultOutputDir
	if req.OutputDir != nil {
		out = *req.OutputDir
	}
	if len(out) > apitypes.NewWorldJobOutputDirMaxLength || !path.IsAbs(out) || path.Clean(out) != out || out == "/" || strings.ContainsRune(out, 0) {
		return lifecycle.Spec{}, domain.Invalid("outputDir", "must be an absolute, clean directory path other than / (e.g. /output)")
	}
	timeout := DefaultTimeout
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout < apitypes.NewWorldJobTimeoutMinimum || timeout > apitypes.NewWorldJobTimeoutMaximum {
		return lifecycle.Spec{}, domain.Invalid("timeout", fmt.Sprintf("must be between %d and %d seconds", apitypes.NewWorldJobTimeoutMinimum, apitypes.NewWorldJobTimeoutMaximum))
	}
	if c := req.CpuCount; c != nil && (*c < apitypes.NewWorldJobCpuCountMinimum || *c > lifecycle.MaxCPU) {
		return lifecycle.Spec{}, domain.Invalid("cpuCount", fmt.Sprintf("must be between %d and %d", apitypes.NewWorldJobCpuCountMinimum, lifecycle.MaxCPU))
	}
	if m := req.MemoryMB; m != nil && (*m < lifecycle.MinMemoryMB || *m > lifecycle.MaxMemoryMB) {
		return lifecycle.Spec{}, domain.Invalid("memoryMB", fmt.Sprintf("must be between %d and %d", lifecycle.MinMemoryMB, lifecycle.MaxMemoryMB))
	}
	spec := lifecycle.Spec{TimeoutSec: timeout, Command: req.Command, CPUCount: req.CpuCount, MemoryMB: req.MemoryMB, OutputDir: out}
	if req.Template != nil {
		spec.TemplateID = *req.Template
	}
	if req.EnvVars != nil {
		spec.EnvVars = *req.EnvVars
	}
	if req.Metadata != nil {
		spec.Metadata = *req.Metadata
	}
	return spec, nil
}

// Load reads job id of org; another org's, a sandbox of another kind or
// none at all is the same 404.
func (s *Service) Load(ctx context.Context, org, id string) (*store.Record, error) {
	r, err := s.db.GetRecord(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (r.OrgID != org || r.Kind != sandbox.KindWorld)) {
		return nil, &domain.NotFoundError{Kind: "world job", ID: id}
	}
	return r, err
}

// Get is the job's view.
func (s *Service) Get(ctx context.Context, org, id string) (Job, error) {
	r, err := s.Load(ctx, org, id)
	if err != nil {
		return Job{}, err
	}
	return s.view(ctx, r), nil
}

// Stop ends a job (terminated); its output is kept as on any end.
func (s *Service) Stop(ctx context.Context, org, id string) (Job, error) {
	r, err := s.Load(ctx, org, id)
	if err != nil {
		return Job{}, err
	}
	if !r.Phase.Terminal() {
		if r, err = s.lc.Delete(ctx, r, sandbox.KillDeleted); err != nil {
			return Job{}, err
		}
	}
	return s.view(ctx, r), nil
}

// List is a page of the org's jobs, newest first, after the record of seq
// afterSeq (0: from the newest).
func (s *Service) List(ctx context.Context, org string, afterSeq int64, limit int) (jobs []Job, lastSeq int64, more bool, err error) {
	recs, err := s.db.ListRecords(ctx, store.RecordFilter{OrgID: org, Kinds: []string{sandbox.KindWorld}, AfterSeq: afterSeq, Limit: limit + 1, Desc: true})
	if err != nil {
		return nil, 0, false, err
	}
	if more = len(recs) > limit; more {
		recs = recs[:limit]
	}
	// One query for the page's outputs, not one per ended job.
	var ended []string
	for _, r := range recs {
		if r.Phase.Terminal() {
			ended = append(ended, r.ID)
		}
	}
	outputs, err := s.db.OutputSummaries(ctx, ended)
	if err != nil {
		return nil, 0, false, err
	}
	jobs = make([]Job, 0, len(recs))
	for _, r := range recs {
		j := s.project(r)
		if o, ok := outputs[r.ID]; ok {
			j.Output = outputView(o)
		}
		jobs = append(jobs, j)
		lastSeq = r.Seq
	}
	return jobs, lastSeq, more, nil
}

// Logs are the job's main-process output lines.
func (s *Service) Logs(ctx context.Context, org, id string) ([]string, error) {
	r, err := s.Load(ctx, org, id)
	if err != nil {
		return nil, err
	}
	return s.lc.Logs(ctx, r)
}

// Output is the tar of the files the job left in its output directory: a
// conflict before it ended (waiting while the stop that keeps the output is
// under way), a 404 when nothing was kept (it never
// started, or its output could not be read; the job's diagnostic says so).
func (s *Service) Output(ctx context.Context, org, id string) (store.Output, error) {
	r, err := s.Load(ctx, org, id)
	if err != nil {
		return store.Output{}, err
	}
	if r.Phase == sandbox.PhaseStopping {
		// Its state is final already; the output is being kept.
		if r, err = s.lc.WaitEnded(ctx, id); err != nil {
			return store.Output{}, err
		}
	}
	if !sandbox.JobEnded(r.Phase) {
		return store.Output{}, &domain.ConflictError{State: sandbox.JobState(r.Phase, r.KillReason), Detail: fmt.Sprintf("world job %q has not ended (it is %s): its output can be downloaded once it has", id, sandbox.JobState(r.Phase, r.KillReason))}
	}
	o, err := s.db.SavedOutput(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Output{}, &domain.NotFoundError{Kind: "output of world job", ID: id}
	}
	return o, err
}

// view projects a job's record with its output's summary once it ended.
func (s *Service) view(ctx context.Context, r *store.Record) Job {
	j := s.project(r)
	if r.Phase.Terminal() {
		if o, err := s.db.OutputSummary(ctx, r.ID); err == nil {
			j.Output = outputView(o)
		}
	}
	return j
}

func outputView(o store.Output) *apitypes.WorldJobOutput {
	return &apitypes.WorldJobOutput{Bytes: o.Bytes, Files: o.Files, Truncated: o.Truncated}
}

// project is a job's record as the API shows it, without its output.
func (s *Service) project(r *store.Record) Job {
	j := Job{Id: r.ID, State: apitypes.WorldJobState(sandbox.JobState(r.Phase, r.KillReason)), TemplateID: r.TemplateID,
		Command: r.Spec.Command, OutputDir: r.Spec.OutputDir, Timeout: r.TimeoutSec, CpuCount: r.CPUCount, MemoryMB: r.MemoryMB,
		CreatedAt: r.CreatedAt, ExitCode: r.ExitCode, StartedAt: timePtr(r.StartedAt), EndedAt: timePtr(r.KilledAt)}
	if len(r.Metadata) > 0 {
		m := r.Metadata
		j.Metadata = &m
	}
	if r.Diagnostic != "" {
		d := r.Diagnostic
		j.Diagnostic = &d
	}
	return j
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
