package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// TimelineEntry records when an environment entered a state.
type TimelineEntry struct {
	State  taskenv.State `json:"state"`
	At     time.Time     `json:"at"`
	Detail string        `json:"detail,omitempty"`
}

// Env is one task environment row.
type Env struct {
	Seq            int64
	ID             string
	OrgID          string
	Workspace      string
	TaskRef        string // as requested
	TaskOrg        string
	TaskName       string
	TaskVersion    string
	Inputs         map[string]string // as requested
	Resolved       map[string]string // with the task's defaults applied
	TimeoutSec     int
	ProjectID      *string
	SecretIDs      []string
	State          taskenv.State
	Error          string
	ServiceURLs    map[string]compute.Endpoint
	Containers     map[string]string // service -> container id, once ready
	OneShots       []string
	Instruction    string
	ExecuteService string
	TokenHash      string
	RecordID       string
	Deadline       time.Time // building/provisioning must be over by then
	ExpiresAt      time.Time // set when ready
	Timeline       []TimelineEntry
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Version        int64
}

const envColumns = `seq, id, org_id, workspace, task_ref, task_org, task_name, task_version, inputs, resolved_inputs, timeout_sec, project_id,
	secret_ids, state, error, service_urls, containers, one_shots, instruction, execute_service, token_hash, record_id,
	deadline, expires_at, timeline, created_at, updated_at, version`

type rowScanner interface{ Scan(dest ...any) error }

func scanEnv(s rowScanner) (*Env, error) {
	var (
		e                                                             Env
		inputs, resolved, secrets, urls, containers, oneShots, timeln string
		project                                                       sql.NullString
		deadline, expires                                             sql.NullInt64
		created, updated                                              int64
	)
	err := s.Scan(&e.Seq, &e.ID, &e.OrgID, &e.Workspace, &e.TaskRef, &e.TaskOrg, &e.TaskName, &e.TaskVersion, &inputs,
		&resolved, &e.TimeoutSec, &project, &secrets, &e.State, &e.Error, &urls, &containers, &oneShots, &e.Instruction,
		&e.ExecuteService, &e.TokenHash, &e.RecordID, &deadline, &expires, &timeln, &created, &updated, &e.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if project.Valid {
		e.ProjectID = &project.String
	}
	e.Deadline, e.ExpiresAt = store.TimeFromNanos(deadline), store.TimeFromNanos(expires)
	e.CreatedAt, e.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	if err := errors.Join(
		json.Unmarshal([]byte(inputs), &e.Inputs),
		json.Unmarshal([]byte(resolved), &e.Resolved),
		json.Unmarshal([]byte(secrets), &e.SecretIDs),
		json.Unmarshal([]byte(urls), &e.ServiceURLs),
		json.Unmarshal([]byte(containers), &e.Containers),
		json.Unmarshal([]byte(oneShots), &e.OneShots),
		json.Unmarshal([]byte(timeln), &e.Timeline),
	); err != nil {
		return nil, fmt.Errorf("decoding environment %s: %w", e.ID, err)
	}
	return &e, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func nonNil[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func envArgs(e *Env) []any {
	var project any
	if e.ProjectID != nil {
		project = *e.ProjectID
	}
	return []any{e.OrgID, e.Workspace, e.TaskRef, e.TaskOrg, e.TaskName, e.TaskVersion, mustJSON(nonNil(e.Inputs)),
		mustJSON(nonNil(e.Resolved)), e.TimeoutSec, project, mustJSON(nonNilSlice(e.SecretIDs)), e.State, e.Error, mustJSON(nonNil(e.ServiceURLs)),
		mustJSON(nonNil(e.Containers)), mustJSON(nonNilSlice(e.OneShots)), e.Instruction, e.ExecuteService, e.TokenHash,
		e.RecordID, store.NanosOrNull(e.Deadline), store.NanosOrNull(e.ExpiresAt), mustJSON(nonNilSlice(e.Timeline)), e.CreatedAt.UnixNano(),
		e.UpdatedAt.UnixNano()}
}

func insertEnvTx(ctx context.Context, tx *sql.Tx, e *Env) error {
	args := append([]any{e.ID}, envArgs(e)...)
	// RETURNING, not LastInsertId: pgx (PostgreSQL) has no LastInsertId,
	// and both databases answer RETURNING.
	err := tx.QueryRowContext(ctx, `INSERT INTO task_environments (id, org_id, workspace, task_ref, task_org, task_name,
		task_version, inputs, resolved_inputs, timeout_sec, project_id, secret_ids, state, error, service_urls, containers,
		one_shots, instruction, execute_service, token_hash, record_id, deadline, expires_at, timeline, created_at, updated_at,
		version) VALUES (`+strings.Repeat("?, ", len(args))+`1) RETURNING seq`, args...).Scan(&e.Seq)
	if err != nil {
		return fmt.Errorf("inserting environment %s: %w", e.ID, err)
	}
	e.Version = 1
	return nil
}

func getEnvTx(ctx context.Context, tx *sql.Tx, id string) (*Env, error) {
	return scanEnv(tx.QueryRowContext(ctx, `SELECT `+envColumns+` FROM task_environments WHERE id = ?`, id))
}

// getEnv reads an environment by id (no org check: internal use).
func (s *Service) getEnv(ctx context.Context, id string) (*Env, error) {
	return scanEnv(s.db.Reader().QueryRowContext(ctx, `SELECT `+envColumns+` FROM task_environments WHERE id = ?`, id))
}

// getOrgEnv reads an environment of org in workspace; anything else is
// store.ErrNotFound so existence does not leak.
func (s *Service) getOrgEnv(ctx context.Context, org, workspace, id string) (*Env, error) {
	return scanEnv(s.db.Reader().QueryRowContext(ctx, `SELECT `+envColumns+` FROM task_environments
		WHERE id = ? AND org_id = ? AND workspace = ?`, id, org, workspace))
}

func (s *Service) pageEnvs(ctx context.Context, org, workspace string, states []string, desc bool, offset, limit int) ([]*Env, error) {
	q := `SELECT ` + envColumns + ` FROM task_environments WHERE org_id = ? AND workspace = ?`
	args := []any{org, workspace}
	if len(states) > 0 {
		q += ` AND state IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(states)), ", ") + `)`
		for _, st := range states {
			args = append(args, st)
		}
	}
	if desc {
		q += ` ORDER BY seq DESC LIMIT ? OFFSET ?`
	} else {
		q += ` ORDER BY seq LIMIT ? OFFSET ?`
	}
	args = append(args, limit, offset)
	return s.queryEnvs(ctx, q, args...)
}

func (s *Service) queryEnvs(ctx context.Context, q string, args ...any) ([]*Env, error) {
	return store.QueryAll(ctx, s.db.Reader(), func(sc store.Scanner) (*Env, error) { return scanEnv(sc) }, q, args...)
}

// liveEnv is a non-terminal environment with its ledger record's phase. An
// environment whose record is stopping is still live: it shows its end only
// once the record ended (taskenv.Of).
type liveEnv struct {
	*Env
	RecordPhase sandbox.Phase
	KillReason  string
}

func (s *Service) liveEnvs(ctx context.Context) ([]liveEnv, error) {
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT `+prefixed("e.", envColumns)+`, COALESCE(r.phase, ''), COALESCE(r.kill_reason, '')
		FROM task_environments e LEFT JOIN sandboxes r ON r.id = e.record_id
		WHERE e.state IN (`+store.SQLList(taskenv.Live)+`) ORDER BY e.seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []liveEnv
	for rows.Next() {
		var le liveEnv
		var env *Env
		env, err = scanEnv(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &le.RecordPhase, &le.KillReason)...)
		}))
		if err != nil {
			return nil, err
		}
		le.Env = env
		out = append(out, le)
	}
	return out, rows.Err()
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

func prefixed(p, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// envStates maps ids to states (missing ids are absent), for the orphan sweep.
func (s *Service) envStates(ctx context.Context, ids []string) (map[string]taskenv.State, error) {
	out := map[string]taskenv.State{}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		if err := s.readStates(ctx, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readStates reads the states of ids (one chunk) into out.
func (s *Service) readStates(ctx context.Context, ids []any, out map[string]taskenv.State) error {
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT id, state FROM task_environments WHERE id IN (`+
		strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`, ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var st taskenv.State
		if err := rows.Scan(&id, &st); err != nil {
			return err
		}
		out[id] = st
	}
	return rows.Err()
}

// errConflict: the environment is not in a state the change applies to (it
// left the state the change expected).
var errConflict = errors.New("environment is not in the expected state")

// errRecordConflict: the ledger record moved (e.g. killed for credits, or
// no longer starting for a change that names a step) so the environment
// change was not applied; the sweep takes over.
var errRecordConflict = errors.New("ledger record is not in the expected phase")

// change is one change of an environment: a move of its ledger record (the
// one state machine: sandbox.AllowedTransitions decides which moves are
// legal) and the environment's own fields. The environment's state is never
// set: it is the projection of the record (taskenv.Of), stored with the row
// so that lists filter on it, and rewritten by every change.
type change struct {
	// step moves a starting environment to its next sub-step
	// (provisioning): only while the record is starting.
	step   taskenv.State
	expect taskenv.State // when set, apply only while the environment is still in this state
	detail string        // timeline note
	env    func(e *Env)
	// envIfMoved applies env only when the record made the move (a
	// teardown of an environment whose record is already ending keeps
	// what that end wrote).
	envIfMoved bool
	// Record side: phase target ("" keeps), why, mutation. A record the
	// table does not let move (already ended, or moved on) is left alone
	// when recTolerant, else the change fails with errRecordConflict.
	rec         sandbox.Phase
	cause       sandbox.Cause
	recTolerant bool
	recMut      func(r *store.Record)
}

// apply runs c in one transaction: the ledger record's move first (the
// table's check), then the environment row with its state projected from
// the record as it now is.
func (s *Service) apply(ctx context.Context, id string, c change) (*Env, error) {
	var out *Env
	var ended bool
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		ended = false
		e, err := getEnvTx(ctx, tx, id)
		if err != nil {
			return err
		}
		out = e
		if err := store.CheckFenceTx(ctx, tx, e.RecordID); err != nil {
			return err // another replica took the environment over
		}
		if c.expect != "" && e.State != c.expect {
			return errConflict
		}
		r, moved, err := s.moveRecordTx(ctx, tx, e, c)
		if err != nil {
			return err
		}
		ended = moved && (r == nil || r.Phase.Terminal())
		shown := e.State
		if c.step != "" {
			if r != nil && !r.Phase.Starting() {
				return errRecordConflict // ending: no next step
			}
			shown = c.step
		}
		now := s.now()
		if c.env != nil && (moved || !c.envIfMoved) {
			c.env(e)
		}
		to := e.State
		switch {
		case r != nil:
			to = taskenv.Of(r.Phase, r.KillReason, shown)
		case c.rec != "":
			// The record is gone: the environment still moves as the change
			// says, and a stop it decides is its end (no record stays
			// stopping to be finished).
			probe := &store.Record{}
			if c.recMut != nil {
				c.recMut(probe)
			}
			p := c.rec
			if p == sandbox.PhaseStopping {
				p = sandbox.FinalPhase(probe.KillReason)
			}
			to = taskenv.Of(p, probe.KillReason, shown)
		}
		if to != e.State {
			e.State = to
			e.Timeline = append(e.Timeline, TimelineEntry{State: to, At: now, Detail: c.detail})
		} else if c.detail != "" {
			e.Timeline = append(e.Timeline, TimelineEntry{State: e.State, At: now, Detail: c.detail})
		}
		e.UpdatedAt = now
		args := append(envArgs(e), e.ID, e.Version)
		res, err := tx.ExecContext(ctx, `UPDATE task_environments SET org_id = ?, workspace = ?, task_ref = ?, task_org = ?,
			task_name = ?, task_version = ?, inputs = ?, resolved_inputs = ?, timeout_sec = ?, project_id = ?, secret_ids = ?, state = ?, error = ?,
			service_urls = ?, containers = ?, one_shots = ?, instruction = ?, execute_service = ?, token_hash = ?, record_id = ?,
			deadline = ?, expires_at = ?, timeline = ?, created_at = ?, updated_at = ?, version = version + 1
			WHERE id = ? AND version = ?`, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errConflict
		}
		e.Version++
		return nil
	})
	if err == nil {
		s.hub.Notify(id)
		if ended && s.cfg.Admission != nil {
			s.cfg.Admission.Wake() // its compute is free: serve the queue
		}
	}
	return out, err
}

// moveRecordTx makes c's move of e's record and returns the record as it is
// after it (nil when the record is gone), and whether c's move was made.
func (s *Service) moveRecordTx(ctx context.Context, tx *sql.Tx, e *Env, c change) (*store.Record, bool, error) {
	if c.rec == "" && c.recMut == nil {
		r, err := store.GetRecordTx(ctx, tx, e.RecordID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, nil
		}
		return r, false, err
	}
	r, err := store.TransitionTx(ctx, tx, e.RecordID, c.rec, c.cause, func(r *store.Record) error {
		if c.rec == "" && r.Phase.Terminal() {
			return store.ErrConflict // an ended record keeps its fields
		}
		if c.recMut != nil {
			c.recMut(r)
		}
		return nil
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		if !c.recTolerant {
			return nil, false, errRecordConflict
		}
		// The record already ended (or moved on) on its own: leave it, and
		// project the environment from it as it is.
		r, err = store.GetRecordTx(ctx, tx, e.RecordID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, nil
		}
		return r, false, err
	case errors.Is(err, store.ErrNotFound):
		return nil, true, nil // the record is gone; the environment still changes
	}
	return r, err == nil, err
}
