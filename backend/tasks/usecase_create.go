package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// CreateRequest asks for one environment of Org in Workspace.
type CreateRequest struct {
	Org, Workspace string
	Body           apitypes.CreateTaskEnvironment
	// IdempotencyKey, when set, makes a retry of the same create answer
	// the first environment instead of making a second (at most 255
	// characters).
	IdempotencyKey string
}

// Created is the outcome of Create. ExecuteToken is empty on a replay: a
// secret is never shown twice.
type Created struct {
	Env          *Env
	ExecuteToken string
	Replayed     bool
}

// MaxIdempotencyKeyLen bounds the Idempotency-Key.
const MaxIdempotencyKeyLen = 255

const idempotencyScope = "task_environments"

// Create validates req, then records the environment (building) and its
// ledger record (pending, or queued when admission says so) in one
// transaction with the idempotency key, after the admission checks
// (Config.Admit, Config.Admission), and queues it for the driver.
// It returns at once; the driver builds and starts it.
func (s *Service) Create(ctx context.Context, req CreateRequest) (Created, error) {
	b := req.Body
	ref, timeout, err := s.validateCreate(b, req.IdempotencyKey)
	if err != nil {
		return Created{}, err
	}
	task, err := s.catalog.Resolve(ctx, ref, req.Org)
	if err != nil {
		return Created{}, domain.NotFound("task", ref.String())
	}
	if err := s.checkRuntime(ctx, task); err != nil {
		return Created{}, err
	}
	resolved, err := task.ResolveInputs(b.Inputs)
	if err != nil {
		var ie *catalog.InputError
		if errors.As(err, &ie) {
			return Created{}, invalidAt(ie.Msg, "inputs", ie.Input)
		}
		return Created{}, err
	}
	cpus, memMB, err := s.footprint(ctx, task, resolved)
	var fe *catalog.FieldError
	if errors.As(err, &fe) {
		// The inputs put a build outside the task's directory.
		return Created{}, &domain.InvalidError{In: domain.InBody, Field: "inputs", Msg: fe.Error(), Path: []any{"inputs"}}
	}
	if err != nil {
		// The build fails on it with the task's words; until then the
		// environment counts as one service with the defaults.
		s.log.Debug("sizing a task environment for admission", "task", task.Ref(), "error", err)
		cpus, memMB = 0, 0
	}
	var project *string
	if b.ProjectID != "" {
		project = &b.ProjectID
	}

	org, ws := req.Org, req.Workspace
	now := s.now()
	token := ids.Token("det")
	e := &Env{ID: ids.New(), OrgID: org, Workspace: ws, TaskRef: ref.String(), TaskOrg: task.Org, TaskName: task.Name,
		TaskVersion: task.Version, Inputs: nonNil(b.Inputs), Resolved: resolved, TimeoutSec: timeout,
		ProjectID: project, SecretIDs: nonNilSlice(b.SecretIDs), State: taskenv.StateBuilding,
		ExecuteService: task.ExecuteService, TokenHash: ids.HashSecret(token), RecordID: ids.New(),
		Deadline: now.Add(s.cfg.BuildDeadline), CreatedAt: now, UpdatedAt: now,
		Timeline: []TimelineEntry{{State: taskenv.StateBuilding, At: now}}}
	rec := &store.Record{ID: e.RecordID, OrgID: org, Kind: sandbox.KindTask, Provider: s.providerName, Phase: sandbox.PhasePending,
		TemplateID: task.Ref(), TimeoutSec: timeout, CPUCount: cpus, MemoryMB: memMB, EnvironmentID: e.ID, CreatedAt: now, PhaseDeadline: e.Deadline,
		Metadata: map[string]string{"environment_id": e.ID, "workspace": ws, "task": task.Ref()}}
	key, scope := req.IdempotencyKey, idempotencyScope+":"+ws
	var replay string
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		if key != "" {
			id, err := store.LookupIdempotencyTx(ctx, tx, org, scope, key)
			if err != nil {
				return err
			}
			if id != "" {
				replay = id
				return nil
			}
		}
		if err := s.insertTx(ctx, tx, task, e, rec); err != nil {
			return err
		}
		if key != "" {
			return store.SaveIdempotencyTx(ctx, tx, org, scope, key, e.ID)
		}
		return nil
	})
	if err != nil {
		return Created{}, err
	}
	if replay != "" {
		prev, err := s.getOrgEnv(ctx, org, ws, replay)
		if err != nil {
			return Created{}, err
		}
		return Created{Env: prev, Replayed: true}, nil
	}
	s.log.Info("task environment created", "environment", e.ID, "org", org, "workspace", ws, "task", task.Ref(), "record", e.RecordID,
		"waits_for_admission", rec.Phase == sandbox.PhaseQueued)
	s.inserted(e, rec)
	return Created{Env: e, ExecuteToken: token}, nil
}

// insertTx asks Config.Admit, places the environment's record (admission)
// and stores both, in tx.
func (s *Service) insertTx(ctx context.Context, tx *sql.Tx, task *catalog.Task, e *Env, rec *store.Record) error {
	if s.cfg.Admit != nil {
		if err := s.cfg.Admit(ctx, e.OrgID); err != nil {
			return err
		}
	}
	if err := s.place(ctx, tx, task, e, rec); err != nil {
		return err
	}
	if err := store.InsertRecordTx(ctx, tx, rec); err != nil {
		return err
	}
	return insertEnvTx(ctx, tx, e)
}

// inserted starts an environment insertTx stored, once committed.
func (s *Service) inserted(e *Env, rec *store.Record) {
	if rec.Phase == sandbox.PhaseQueued {
		// After the commit, so a pass on another connection (PostgreSQL)
		// sees it; it is kicked when admitted (Admitted).
		s.cfg.Admission.Wake()
	} else {
		s.kick(e.ID)
	}
}

// validateCreate checks what a create says on its own, before the catalog
// is asked: the task reference, the timeout (the default when absent), the
// project and secret ids, the idempotency key.
func (s *Service) validateCreate(b apitypes.CreateTaskEnvironment, key string) (catalog.Ref, int, error) {
	raw := strings.TrimSpace(b.TaskRef)
	if raw == "" {
		return catalog.Ref{}, 0, domain.Invalid("task_ref", "required: the task to provision, [org/]name[@version] (see GET /api/v1/org/{org}/tasks)")
	}
	ref, err := catalog.ParseRef(raw)
	if err != nil {
		return catalog.Ref{}, 0, domain.Invalid("task_ref", err.Error())
	}
	timeout := s.cfg.DefaultTimeoutSec
	if b.TimeoutSec != nil {
		timeout = *b.TimeoutSec
		if timeout < s.cfg.MinTimeoutSec || timeout > s.cfg.MaxTimeoutSec {
			return catalog.Ref{}, 0, domain.Invalid("timeout_sec",
				fmt.Sprintf("must be between %d and %d seconds, not %d", s.cfg.MinTimeoutSec, s.cfg.MaxTimeoutSec, timeout))
		}
	}
	if len(b.ProjectID) > 200 || !utf8.ValidString(b.ProjectID) {
		return catalog.Ref{}, 0, domain.Invalid("project_id", "must be a string of at most 200 characters")
	}
	if len(b.SecretIDs) > 100 {
		return catalog.Ref{}, 0, domain.Invalid("secret_ids", "at most 100 secret ids")
	}
	for i, sid := range b.SecretIDs {
		if sid == "" || len(sid) > 200 {
			return catalog.Ref{}, 0, invalidAt("must be a non-empty string of at most 200 characters", "secret_ids", i)
		}
	}
	if len(key) > MaxIdempotencyKeyLen {
		return catalog.Ref{}, 0, &domain.InvalidError{In: domain.InHeader, Field: "Idempotency-Key",
			Msg: fmt.Sprintf("at most %d characters", MaxIdempotencyKeyLen)}
	}
	return ref, timeout, nil
}

// checkRuntime refuses, before anything is recorded, a task whose runtime
// (task.yaml) the engine does not offer: invalid task_ref, naming the
// engine's runtimes.
func (s *Service) checkRuntime(ctx context.Context, task *catalog.Task) error {
	rc, ok := s.engine.(RuntimeChecker)
	if !ok || task.Runtime == "" {
		return nil
	}
	err := rc.CheckRuntime(ctx, "task "+task.Ref()+" asks in task.yaml for runtime", task.Runtime)
	var re *hardening.RuntimeError
	if errors.As(err, &re) {
		return domain.Invalid("task_ref", re.Error())
	}
	if err != nil {
		return &domain.ProviderError{Detail: err.Error()}
	}
	return nil
}
