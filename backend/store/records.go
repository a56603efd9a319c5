package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// recordFrom joins a record's sandboxes row with its accruals row (migration
// 00010), which holds what it was billed; recordColumns names both.
const recordFrom = `sandboxes s JOIN accruals a ON a.seq = s.seq`

const recordColumns = `s.seq, s.id, s.org_id, s.kind, s.provider, s.provider_id, s.provider_data, s.phase, s.template_id, s.spec, s.metadata,
	s.cpu_count, s.memory_mb, s.auto_pause, s.auto_resume, s.timeout_sec, s.access_token_hash, s.created_at, s.started_at,
	s.last_started_at, s.last_paused_at, s.killed_at, s.end_at, s.phase_deadline, s.kill_reason, s.diagnostic, s.exit_code,
	s.timeline, s.endpoints, a.billed_micro, a.billed_ns, s.runtime_ns, s.running_since, s.sessions, s.runtime_id, s.environment_id, s.parent_id, s.checkpoint, s.version`

func scanRecord(s Scanner) (*Record, error) {
	var (
		r                                                          Record
		spec, meta, timeline, endpoints                            string
		autoPause, autoResume                                      int
		started, lastStarted, lastPaused, killed, endAt, dl, since sql.NullInt64
		exit                                                       sql.NullInt64
	)
	err := s.Scan(&r.Seq, &r.ID, &r.OrgID, &r.Kind, &r.Provider, &r.ProviderID, &r.ProviderData, &r.Phase, &r.TemplateID,
		&spec, &meta, &r.CPUCount, &r.MemoryMB, &autoPause, &autoResume, &r.TimeoutSec, &r.AccessTokenHash,
		nsTime(&r.CreatedAt), &started, &lastStarted, &lastPaused, &killed, &endAt, &dl, &r.KillReason, &r.Diagnostic,
		&exit, &timeline, &endpoints, &r.BilledMicro, &r.BilledNs, &r.RuntimeNs, &since, &r.Sessions, &r.RuntimeID, &r.EnvironmentID, &r.ParentID, &r.Checkpoint, &r.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r.AutoPause, r.AutoResume = autoPause != 0, autoResume != 0
	r.StartedAt, r.LastStartedAt, r.LastPausedAt = TimeFromNanos(started), TimeFromNanos(lastStarted), TimeFromNanos(lastPaused)
	r.KilledAt, r.EndAt, r.PhaseDeadline, r.RunningSince = TimeFromNanos(killed), TimeFromNanos(endAt), TimeFromNanos(dl), TimeFromNanos(since)
	if exit.Valid {
		v := int(exit.Int64)
		r.ExitCode = &v
	}
	if err := errors.Join(
		json.Unmarshal([]byte(spec), &r.Spec),
		json.Unmarshal([]byte(meta), &r.Metadata),
		json.Unmarshal([]byte(timeline), &r.Timeline),
		json.Unmarshal([]byte(endpoints), &r.Endpoints),
	); err != nil {
		return nil, fmt.Errorf("decoding record %s: %w", r.ID, err)
	}
	return &r, nil
}

// nsTimeScanner scans a NOT NULL nanosecond column into a time.Time.
type nsTimeScanner struct{ t *time.Time }

func nsTime(t *time.Time) *nsTimeScanner { return &nsTimeScanner{t} }

func (s *nsTimeScanner) Scan(v any) error {
	n, ok := v.(int64)
	if !ok {
		return fmt.Errorf("time column: unexpected %T", v)
	}
	*s.t = time.Unix(0, n).UTC()
	return nil
}

// TimeFromNanos reads a nullable Unix-nanosecond column (NULL is the zero time).
func TimeFromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// NanosOrNull writes a time as Unix nanoseconds, the zero time as NULL.
func NanosOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func recordArgs(r *Record) ([]any, error) {
	spec, err := json.Marshal(r.Spec)
	if err != nil {
		return nil, err
	}
	meta, _ := json.Marshal(nonNilMap(r.Metadata))
	timeline, _ := json.Marshal(nonNilSlice(r.Timeline))
	endpoints, _ := json.Marshal(r.Endpoints)
	if r.Endpoints == nil {
		endpoints = []byte("{}")
	}
	var exit any
	if r.ExitCode != nil {
		exit = *r.ExitCode
	}
	return []any{r.ID, r.OrgID, r.Kind, r.Provider, r.ProviderID, r.ProviderData, string(r.Phase), r.TemplateID,
		string(spec), string(meta), r.CPUCount, r.MemoryMB, b2i(r.AutoPause), b2i(r.AutoResume), r.TimeoutSec,
		r.AccessTokenHash, r.CreatedAt.UnixNano(), NanosOrNull(r.StartedAt), NanosOrNull(r.LastStartedAt), NanosOrNull(r.LastPausedAt),
		NanosOrNull(r.KilledAt), NanosOrNull(r.EndAt), NanosOrNull(r.PhaseDeadline), r.KillReason, r.Diagnostic, exit,
		string(timeline), string(endpoints), r.RuntimeNs, NanosOrNull(r.RunningSince), r.Sessions,
		r.RuntimeID, r.EnvironmentID, r.ParentID, r.Checkpoint}, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ErrNotStartPhase is an insert at a phase sandbox.StartPhases does not
// list: every other phase is reached through Transition, so that the
// record's timeline shows only moves the gate allowed.
var ErrNotStartPhase = errors.New("a record starts in a start phase (sandbox.StartPhases) and reaches any other through Transition")

// ErrPhaseChangeInUpdate is a mutate function that changed the phase: a
// phase change goes through the gate with its target named (Transition's
// to), where the table checks it and the timeline records its cause.
var ErrPhaseChangeInUpdate = errors.New("mutate changed the phase: name the target phase in Transition instead")

// InsertRecord stores a new record. Its timeline starts with its phase,
// which must be one of sandbox.StartPhases (ErrNotStartPhase otherwise).
func (db *DB) InsertRecord(ctx context.Context, r *Record) error {
	return db.Tx(ctx, func(tx *sql.Tx) error { return InsertRecordTx(ctx, tx, r) })
}

// InsertRecordTx is InsertRecord inside a caller's transaction (e.g. with an
// idempotency key, or a credit check).
func InsertRecordTx(ctx context.Context, tx *sql.Tx, r *Record) error {
	if !sandbox.CanStartIn(r.Phase) {
		return fmt.Errorf("inserting record %s in phase %q: %w", r.ID, r.Phase, ErrNotStartPhase)
	}
	return insertRecordTx(ctx, tx, r)
}

// insertRecordTx writes r as it is, whatever its phase: the gate's check is
// InsertRecordTx's (and deliberately absent from InsertFixtureTx's).
func insertRecordTx(ctx context.Context, tx *sql.Tx, r *Record) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	if len(r.Timeline) == 0 {
		r.Timeline = []TimelineEntry{{Phase: string(r.Phase), At: r.CreatedAt}}
	}
	r.Version = 1
	args, err := recordArgs(r)
	if err != nil {
		return err
	}
	// RETURNING rather than LastInsertId, which pgx does not implement
	// (PostgreSQL has no last-insert id); SQLite supports both.
	err = tx.QueryRowContext(ctx, `INSERT INTO sandboxes (id, org_id, kind, provider, provider_id, provider_data, phase,
		template_id, spec, metadata, cpu_count, memory_mb, auto_pause, auto_resume, timeout_sec, access_token_hash,
		created_at, started_at, last_started_at, last_paused_at, killed_at, end_at, phase_deadline, kill_reason,
		diagnostic, exit_code, timeline, endpoints, runtime_ns, running_since, sessions, runtime_id,
		environment_id, parent_id, checkpoint, version) VALUES (`+placeholders(len(args))+`, 1) RETURNING seq`, args...).Scan(&r.Seq)
	if err != nil {
		return fmt.Errorf("inserting record %s: %w", r.ID, err)
	}
	if err := insertAccrualTx(ctx, tx, r); err != nil {
		return fmt.Errorf("inserting record %s: %w", r.ID, err)
	}
	notePending(tx, r)
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// GetRecord reads one record by id, ErrNotFound when absent.
// On PostgreSQL a cached copy is served only after a read barrier
// (listen.go), so the read sees every write another replica acknowledged
// before it began (unless ctx is Relaxed).
func (db *DB) GetRecord(ctx context.Context, id string) (*Record, error) {
	if r, ok := db.cachedRecord(ctx, id); ok {
		return r.Clone(), nil
	}
	ep := db.cache.at()
	r, err := scanRecord(db.r.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE s.id = ?`, id))
	if err == nil {
		db.cache.putAt(r, ep)
	}
	return r, err
}

// cachedRecord is the cached copy of id that may be served now (shared: do
// not modify it).
func (db *DB) cachedRecord(ctx context.Context, id string) (*Record, bool) {
	if _, ok := db.cache.peek(id); !ok || !db.fresh(ctx) {
		return nil, false
	}
	return db.cache.peek(id) // after the barrier: no older than any acknowledged write
}

// PeekOrgRecord is GetOrgRecord without the copy: the record is shared with
// the cache and must not be modified (cached records are replaced, never
// changed in place). It serves the hot read-only path.
func (db *DB) PeekOrgRecord(ctx context.Context, orgID, id string) (*Record, error) {
	r, ok := db.cachedRecord(ctx, id)
	if !ok {
		var err error
		if r, err = db.GetRecord(ctx, id); err != nil {
			return nil, err
		}
	}
	if r.OrgID != orgID {
		return nil, ErrNotFound
	}
	return r, nil
}

// GetOrgRecord reads a record only if it belongs to org; another org's record
// is ErrNotFound so its existence does not leak.
func (db *DB) GetOrgRecord(ctx context.Context, orgID, id string) (*Record, error) {
	r, err := db.GetRecord(ctx, id)
	if err == nil && r.OrgID != orgID {
		return nil, ErrNotFound
	}
	return r, err
}

// ErrConflict is returned by Transition when the record is not where the
// move needs it (a concurrent change won, or the phase it is in does not
// allow the move); the caller gets the record as it is now.
var ErrConflict = errors.New("record is not in the expected phase")

// ErrIllegalTransition is returned (as an *IllegalTransitionError) when the
// record's phase does not allow the move (sandbox.AllowedTransitions). It
// also matches ErrConflict: to a caller that read the record earlier, a move
// its current phase forbids is exactly what a lost race looks like (a delete
// meanwhile, a kill for credits), and every caller already handles that by
// re-reading. Code that must tell a bug from a race tests for this error.
var ErrIllegalTransition = errors.New("the sandbox phase does not allow this transition")

// IllegalTransitionError is a move sandbox.AllowedTransitions refuses.
type IllegalTransitionError struct {
	ID       string
	From, To sandbox.Phase
	Cause    sandbox.Cause
}

func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("sandbox %s cannot go from %s to %s (%s)", e.ID, e.From, e.To, e.Cause)
}

// Is makes the error match both ErrIllegalTransition and ErrConflict.
func (e *IllegalTransitionError) Is(target error) bool {
	return target == ErrIllegalTransition || target == ErrConflict
}

// Transition is the one gate of every phase change: it moves record id to
// phase to for cause, if sandbox.AllowedTransitions allows the move from the
// phase the record is in (an *IllegalTransitionError otherwise), applying
// mutate first (which may change any field but the phase: a mutate that
// changes it fails with ErrPhaseChangeInUpdate and writes nothing) and recording the
// cause on the new timeline entry. The write is conditional on the version
// read, so a concurrent transition makes this one fail with ErrConflict
// instead of undoing the other.
//
// to == "" keeps the phase: a field-only update (no timeline entry, no cause
// needed) allowed in any phase; mutate refuses it where a phase rules it
// out. Staying in the current phase is not a move: to == the current phase
// is refused like any move the table does not list.
//
// The table decides what is legal. A caller acting on an observation of the
// record (its phase when it decided) and not only on the table wraps mutate
// in Expect.
func (db *DB) Transition(ctx context.Context, id string, to sandbox.Phase, cause sandbox.Cause, mutate func(r *Record) error) (*Record, error) {
	var out *Record
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		r, err := TransitionTx(ctx, tx, id, to, cause, mutate)
		out = r
		return err
	})
	return out, err
}

// Expect wraps mutate so that the transition applies only while the record
// is still in phase p (ErrConflict otherwise, with the current record): for
// the rare caller whose decision rests on the phase it observed rather than
// on the table alone (optimistic concurrency), e.g. a TTL expiry decided on
// a running or paused record, or an observation of the record's instance.
func Expect(p sandbox.Phase, mutate func(r *Record) error) func(r *Record) error {
	return func(r *Record) error {
		if r.Phase != p {
			return ErrConflict
		}
		if mutate == nil {
			return nil
		}
		return mutate(r)
	}
}

// TransitionTx is Transition inside a caller's transaction. On ErrConflict
// (and ErrIllegalTransition) it returns the current record. Under a ctx
// carrying the record's lease (WithFence) the write also requires the lease
// to be still that one, and fails with ErrLeaseLost when another replica
// took the record over.
func TransitionTx(ctx context.Context, tx *sql.Tx, id string, to sandbox.Phase, cause sandbox.Cause, mutate func(r *Record) error) (*Record, error) {
	if to != "" && !cause.Valid() {
		return nil, fmt.Errorf("moving sandbox %s to %s: unknown cause %q (see sandbox.Causes)", id, to, cause)
	}
	q := `SELECT ` + recordColumns + ` FROM ` + recordFrom + ` WHERE s.id = ?`
	if isPostgresTx(tx) {
		// Lock the row from the read to the write. Under READ COMMITTED a
		// write committed in between (a settlement's charge, another
		// replica's field update) would otherwise fail this move on the
		// version although its phase still allows it: a DELETE answered
		// 204 while the record stayed running. Writers that skip the gate
		// (settlement) wait for the lock and then miss on the version,
		// retrying next pass. SQLite's DB.Tx already runs writers one at a time.
		q += ` FOR UPDATE`
	}
	r, err := scanRecord(tx.QueryRowContext(ctx, q, id))
	if err != nil {
		return nil, err
	}
	if to != "" && !sandbox.CanTransition(r.Phase, to) {
		return r, &IllegalTransitionError{ID: id, From: r.Phase, To: to, Cause: cause}
	}
	before, moved := accrualOf(r), beforeMove(r, to)
	if mutate != nil {
		from := r.Phase
		if err := mutate(r); err != nil {
			return r, err
		}
		if r.Phase != from {
			// Refused whether or not the table would allow the move: a
			// move named only inside mutate escapes the table's check and
			// leaves no timeline entry or cause.
			err := fmt.Errorf("updating sandbox %s: phase %s changed to %s inside mutate (%s): %w", id, from, r.Phase, cause, ErrPhaseChangeInUpdate)
			r.Phase = from
			return r, err
		}
	}
	at := time.Now().UTC()
	if to != "" {
		r.Phase = to
		r.Spec.PauseKind = sandbox.PauseKindAfter(to, r.Spec.PauseKind)
		r.Timeline = append(r.Timeline, TimelineEntry{Phase: string(to), At: at, Cause: cause})
	}
	args, err := recordArgs(r)
	if err != nil {
		return nil, err
	}
	args = append(args[1:], r.ID, r.Version) // drop id from the SET list
	fence, fargs := fenceFor(ctx, id)        // a replica's write carries its lease (lease.go)
	res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET org_id = ?, kind = ?, provider = ?, provider_id = ?, provider_data = ?,
		phase = ?, template_id = ?, spec = ?, metadata = ?, cpu_count = ?, memory_mb = ?, auto_pause = ?, auto_resume = ?,
		timeout_sec = ?, access_token_hash = ?, created_at = ?, started_at = ?, last_started_at = ?, last_paused_at = ?,
		killed_at = ?, end_at = ?, phase_deadline = ?, kill_reason = ?, diagnostic = ?, exit_code = ?, timeline = ?,
		endpoints = ?, runtime_ns = ?, running_since = ?, sessions = ?, runtime_id = ?, environment_id = ?,
		parent_id = ?, checkpoint = ?, version = version + 1 WHERE id = ? AND version = ?`+fence, append(args, fargs...)...)
	if err != nil {
		return nil, fmt.Errorf("updating record %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		if fence != "" {
			return r, fenceLost(ctx, tx, id)
		}
		return r, ErrConflict
	}
	if err := mirrorAccrualTx(ctx, tx, before, r); err != nil {
		return nil, fmt.Errorf("updating record %s: %w", id, err)
	}
	if e := eventOfMove(moved, r, to, cause, at); e != nil { // the outbox: in the change's transaction
		if err := insertEventTx(ctx, tx, e); err != nil {
			return nil, err
		}
	}
	r.Version++
	notePending(tx, r)
	return r, nil
}

// RecordFilter selects records for listing.
type RecordFilter struct {
	OrgID  string
	Phases []sandbox.Phase // any of these; empty (and no Stopping) = all
	// Stopping adds the stopping records leaving one of these (what the
	// ledger reads them as, sandbox.LeavingOf); leave PhaseStopping out of
	// Phases when using it.
	Stopping []sandbox.Leaving
	Kinds    []string
	Metadata map[string]string // every pair must match
	AfterSeq int64             // cursor: records after this seq in the listing's order (0: from the start)
	Limit    int
	// Desc lists newest first (seq descending; AfterSeq then selects
	// smaller seqs); the default is insertion order, oldest first.
	Desc bool
}

// ListRecords lists an org's records in insertion order (newest first with
// f.Desc). Paging by seq keeps
// a cursor stable while records are inserted. The query reads only ids and
// versions from the indexes (sandboxes_org_phase_seq, sandboxes_org_seq);
// the records come from the cache when it holds that version, and only the
// others are read and decoded. The returned records are shared with the
// cache: callers must not modify them.
func (db *DB) ListRecords(ctx context.Context, f RecordFilter) ([]*Record, error) {
	ep := db.cache.at()
	refs, err := db.listRefs(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]*Record, len(refs))
	var missing []string
	for i, r := range refs {
		if c, ok := db.cache.peek(r.id); ok && c.Version == r.version {
			out[i] = c
		} else {
			missing = append(missing, r.id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	loaded, err := db.GetRecords(ctx, missing) // at most a page: within SQLite's parameter limit
	if err != nil {
		return nil, err
	}
	for _, r := range loaded {
		db.cache.putAt(r, ep)
	}
	kept := out[:0]
	for i, r := range refs {
		if out[i] == nil {
			out[i] = loaded[r.id] // nil when deleted meanwhile (records are never deleted today)
		}
		if out[i] != nil {
			kept = append(kept, out[i])
		}
	}
	return kept, nil
}

type recordRef struct {
	seq     int64
	id      string
	version int64
}

// listRefs finds the page: one query per phase asked for, each an ordered
// walk of sandboxes_org_phase_seq that stops at the page size, merged by seq.
// (One query with phase IN (…) would either walk every record of the org in
// seq order or sort every match: both grow with the org's history.)
//
// The per-phase queries read one snapshot (a read-only transaction,
// REPEATABLE READ on PostgreSQL): a record that moved from one listed phase
// to another between two of them was listed twice (running, then deleted),
// or not at all when it moved the other way.
func (db *DB) listRefs(ctx context.Context, f RecordFilter) ([]recordRef, error) {
	if len(f.Phases)+len(f.Stopping) <= 1 {
		return db.queryRefs(ctx, nil, f)
	}
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to keep
	var all []recordRef
	var parts []RecordFilter
	for _, p := range f.Phases {
		one := f
		one.Phases, one.Stopping = []sandbox.Phase{p}, nil
		parts = append(parts, one)
	}
	for _, l := range f.Stopping {
		one := f
		one.Phases, one.Stopping = nil, []sandbox.Leaving{l}
		parts = append(parts, one)
	}
	for _, one := range parts {
		refs, err := db.queryRefs(ctx, tx, one)
		if err != nil {
			return nil, err
		}
		all = append(all, refs...)
	}
	slices.SortFunc(all, func(a, b recordRef) int {
		if f.Desc {
			return cmp.Compare(b.seq, a.seq)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
	}
	return all, nil
}

// queryRefs runs one list query, in tx when not nil.
func (db *DB) queryRefs(ctx context.Context, tx *sql.Tx, f RecordFilter) ([]recordRef, error) {
	q, args := listQuery(db.dialect, f)
	var rows *sql.Rows
	var err error
	// The prepared statement is the DB's, kept for its life; the
	// transaction's copy is closed with the transaction.
	if stmt := db.prepared(ctx, q); stmt != nil { //nolint:sqlclosecheck // closed with the DB (prepared keeps it)
		if tx != nil {
			stmt = tx.StmtContext(ctx, stmt) //nolint:sqlclosecheck // a transaction's statement closes with it
		}
		rows, err = stmt.QueryContext(ctx, args...)
	} else if tx != nil {
		rows, err = tx.QueryContext(ctx, q, args...)
	} else {
		rows, err = db.r.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var refs []recordRef
	for rows.Next() {
		var r recordRef
		if err := rows.Scan(&r.seq, &r.id, &r.version); err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, rows.Err()
}

// knownPhases and knownKinds are written into list queries as literals (not
// bound parameters) so SQLite can match partial indexes and plan per phase.
var (
	knownPhases = sandbox.Phases
	knownKinds  = sandbox.Kinds
)

func listQuery(d Dialect, f RecordFilter) (string, []any) {
	after, dir := ">", ""
	if f.Desc && f.AfterSeq > 0 {
		after = "<"
	}
	if f.Desc {
		dir = " DESC"
	}
	q := `SELECT seq, id, version FROM sandboxes WHERE org_id = ? AND seq ` + after + ` ?`
	args := []any{f.OrgID, f.AfterSeq}
	if d == Postgres {
		// PostgreSQL's planner, given ORDER BY seq LIMIT n, walks the
		// primary key and filters by org (it assumes the org's rows are
		// spread evenly over seq), reading every tenant's history. Pinning
		// the org by a closed range instead of = keeps org_id in the sort
		// order, which only the (org_id, …, seq) indexes provide.
		q = `SELECT seq, id, version FROM sandboxes WHERE org_id >= ? AND org_id <= ? AND seq ` + after + ` ?`
		args = []any{f.OrgID, f.OrgID, f.AfterSeq}
	}
	var phaseConds []string
	if len(f.Phases) > 0 {
		phaseConds = append(phaseConds, `phase IN (`+inList(f.Phases, knownPhases, &args)+`)`)
	}
	for _, l := range f.Stopping {
		phaseConds = append(phaseConds, `(phase = `+SQLList([]sandbox.Phase{sandbox.PhaseStopping})+` AND `+leavingCond(l)+`)`)
	}
	switch len(phaseConds) {
	case 0:
	case 1:
		q += ` AND ` + phaseConds[0]
	default:
		q += ` AND (` + strings.Join(phaseConds, ` OR `) + `)`
	}
	if len(f.Kinds) > 0 {
		q += ` AND kind IN (` + inList(f.Kinds, knownKinds, &args) + `)`
	}
	for k, v := range f.Metadata {
		// metadata is a JSON object in a TEXT column on both databases.
		if d == Postgres {
			// The casts pick ->>'s text overload for the bound key.
			q += ` AND (metadata::jsonb ->> CAST(? AS text)) = CAST(? AS text)`
			args = append(args, k, v)
			continue
		}
		q += ` AND json_extract(metadata, ?) = ?`
		args = append(args, `$."`+strings.ReplaceAll(k, `"`, `\"`)+`"`, v)
	}
	if d == Postgres {
		q += ` ORDER BY org_id` + dir + `, seq` + dir
	} else {
		q += ` ORDER BY seq` + dir
	}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args
}

// leavingCond selects, among stopping records, those leaving l, by the
// clocks sandbox.LeavingOf reads (NULL when never set).
func leavingCond(l sandbox.Leaving) string {
	kinds := `kind IN (` + SQLList(sandbox.LedgerStoppingKinds) + `)`
	switch l {
	case sandbox.LeavingStart:
		return kinds + ` AND last_started_at IS NULL`
	case sandbox.LeavingRunning:
		return kinds + ` AND last_started_at IS NOT NULL AND (last_paused_at IS NULL OR last_paused_at < last_started_at)`
	case sandbox.LeavingPaused:
		return kinds + ` AND last_started_at IS NOT NULL AND last_paused_at >= last_started_at`
	case sandbox.LeavingEnded:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return `kind NOT IN (` + SQLList(sandbox.LedgerStoppingKinds) + `)`
}

// maxPrepared bounds the list statements kept prepared (their texts vary
// only with the filter's shape: phase, kinds, number of metadata pairs).
const maxPrepared = 256

// prepared returns the statement for q, prepared once on the reader pool
// (parsing the SQL costs more than running a page query from its index), or
// nil when it cannot be kept: the caller then runs q unprepared.
func (db *DB) prepared(ctx context.Context, q string) *sql.Stmt {
	if s, ok := db.stmts.Load(q); ok {
		return s.(*sql.Stmt)
	}
	if db.nstmts.Add(1) > maxPrepared {
		db.nstmts.Add(-1)
		return nil
	}
	s, err := db.r.PrepareContext(ctx, q)
	if err != nil {
		db.nstmts.Add(-1)
		return nil
	}
	if prev, loaded := db.stmts.LoadOrStore(q, s); loaded {
		db.nstmts.Add(-1)
		s.Close() //nolint:sqlclosecheck // another caller's statement won the race; this one is not kept
		return prev.(*sql.Stmt)
	}
	return s
}

// inList renders values as SQL literals when they are known constants, as
// bound parameters otherwise.
func inList[T ~string](vals, known []T, args *[]any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		if slices.Contains(known, v) {
			parts[i] = "'" + string(v) + "'"
		} else {
			parts[i] = "?"
			*args = append(*args, string(v))
		}
	}
	return strings.Join(parts, ", ")
}

func (db *DB) queryRecords(ctx context.Context, q string, args ...any) ([]*Record, error) {
	return QueryAll(ctx, db.r, scanRecord, q, args...)
}

// DueRecords returns the ids of records (other than group members, sandbox.GroupMemberKinds) the reconciler
// owes work at now: transitional phases, and live ones whose TTL has passed.
func (db *DB) DueRecords(ctx context.Context, now time.Time) ([]string, error) {
	return QueryStrings(ctx, db.r, `SELECT id FROM sandboxes WHERE kind NOT IN (`+SQLList(sandbox.GroupMemberKinds)+`) AND (
		phase IN (`+SQLList(sandbox.Transitional)+`)
		OR (phase IN (`+SQLList(expirable)+`) AND end_at IS NOT NULL AND end_at <= ?)) ORDER BY seq`, now.UnixNano())
}

// expirable are the stable phases whose TTL the reconciler enforces.
var expirable = []sandbox.Phase{sandbox.PhaseRunning, sandbox.PhasePaused}

// LiveRecords returns the records (other than group members, sandbox.GroupMemberKinds) whose instance should
// exist: everything not terminal. The reconciler compares them with the
// provider's instances.
func (db *DB) LiveRecords(ctx context.Context) ([]*Record, error) {
	return db.queryRecords(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE s.kind NOT IN (`+SQLList(sandbox.GroupMemberKinds)+`)
		AND s.phase NOT IN (`+SQLList(sandbox.Terminal)+`) ORDER BY s.seq`)
}

// RecordPhases maps record ids to phases for the given ids (missing ids are
// absent).
func (db *DB) RecordPhases(ctx context.Context, ids []string) (map[string]sandbox.Phase, error) {
	recs, err := db.RecordInstances(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]sandbox.Phase, len(recs))
	for id, ri := range recs {
		out[id] = ri.Phase
	}
	return out, nil
}

// PhaseCounts counts an org's records (other than group members, sandbox.GroupMemberKinds) per phase.
func (db *DB) PhaseCounts(ctx context.Context, orgID string) (map[sandbox.Phase]int, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT phase, COUNT(*) FROM sandboxes WHERE org_id = ? AND kind NOT IN (`+SQLList(sandbox.GroupMemberKinds)+`) GROUP BY phase`, orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[sandbox.Phase]int{}
	for rows.Next() {
		var p sandbox.Phase
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, err
		}
		out[p] = n
	}
	return out, rows.Err()
}

// OrgCredits returns an org's balance in millionths of a credit.
func (db *DB) OrgCredits(ctx context.Context, orgID string) (int64, error) {
	var c int64
	err := db.r.QueryRowContext(ctx, `SELECT credits_micro FROM orgs WHERE id = ?`, orgID).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return c, err
}

// PhaseTotals counts every record per kind and phase (for /metrics).
func (db *DB) PhaseTotals(ctx context.Context) (map[[2]string]int, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT kind, phase, COUNT(*) FROM sandboxes GROUP BY kind, phase`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[[2]string]int{}
	for rows.Next() {
		var k, p string
		var n int
		if err := rows.Scan(&k, &p, &n); err != nil {
			return nil, err
		}
		out[[2]string{k, p}] = n
	}
	return out, rows.Err()
}

// CheckpointInUse reports whether a record that is not over names
// checkpoint: its images are then still needed (a fork waiting in the
// queue has no container yet, so the engine alone cannot tell).
func (db *DB) CheckpointInUse(ctx context.Context, checkpoint string) (bool, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE checkpoint = ? AND phase NOT IN (?, ?, ?)`,
		checkpoint, string(sandbox.PhaseCompleted), string(sandbox.PhaseFailed), string(sandbox.PhaseDeleted)).Scan(&n)
	return n > 0, err
}
