package runtimes

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Runtime is a stored runtime: the stable identity of interactive compute.
// Its state is not stored: it is derived from the record it links.
type Runtime struct {
	Seq             int64
	ID              string
	OrgID           string
	Workspace       string
	Name            string
	TemplateID      string
	CPUCount        int // 0: the template's default
	MemoryMB        int // 0: the template's default
	TimeoutSec      int
	EnvVars         map[string]string
	Metadata        map[string]string
	CurrentRecordID string // the linked sandbox record ("" when idle after reset)
	LastRecordID    string // the previous linked record, kept for audit
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const runtimeColumns = `seq, id, org_id, workspace, name, template_id, cpu_count, memory_mb, timeout_sec, env_vars, metadata,
	current_record_id, last_record_id, created_at, updated_at`

type rowScanner interface{ Scan(dest ...any) error }

func scanRuntime(sc rowScanner) (*Runtime, error) {
	var rt Runtime
	var env, meta string
	var created, updated int64
	err := sc.Scan(&rt.Seq, &rt.ID, &rt.OrgID, &rt.Workspace, &rt.Name, &rt.TemplateID, &rt.CPUCount, &rt.MemoryMB, &rt.TimeoutSec,
		&env, &meta, &rt.CurrentRecordID, &rt.LastRecordID, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := errors.Join(json.Unmarshal([]byte(env), &rt.EnvVars), json.Unmarshal([]byte(meta), &rt.Metadata)); err != nil {
		return nil, err
	}
	rt.CreatedAt, rt.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return &rt, nil
}

func jsonMap(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// insertRuntime stores rt unless the org's workspace already has one with
// its name (409). With an idempotency key, a repeated create returns the
// first runtime (replayed true).
func (s *Service) insertRuntime(ctx context.Context, rt *Runtime, idemKey string) (*Runtime, bool, error) {
	var replayID string
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		replayID = ""
		if idemKey != "" {
			id, err := store.LookupIdempotencyTx(ctx, tx, rt.OrgID, "runtime", idemKey)
			if err != nil {
				return err
			}
			if id != "" {
				replayID = id
				return nil
			}
		}
		// Two creates of one name must not both pass the check below (on
		// PostgreSQL the loser would hit the unique index: a 500, not 409).
		if err := store.LockTx(ctx, tx, "runtime-name", rt.OrgID, rt.Workspace, rt.Name); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_runtimes WHERE org_id = ? AND workspace = ? AND name = ?`,
			rt.OrgID, rt.Workspace, rt.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return domain.Conflict("a runtime named \"" + rt.Name + "\" already exists in workspace \"" + rt.Workspace + "\"; pick another name or reuse it")
		}
		// RETURNING rather than LastInsertId, which pgx does not implement.
		err := tx.QueryRowContext(ctx, `INSERT INTO ledger_runtimes (id, org_id, workspace, name, template_id, cpu_count, memory_mb,
			timeout_sec, env_vars, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
			rt.ID, rt.OrgID, rt.Workspace, rt.Name, rt.TemplateID, rt.CPUCount, rt.MemoryMB, rt.TimeoutSec,
			jsonMap(rt.EnvVars), jsonMap(rt.Metadata), rt.CreatedAt.UnixNano(), rt.UpdatedAt.UnixNano()).Scan(&rt.Seq)
		if err != nil {
			return err
		}
		if idemKey != "" {
			return store.SaveIdempotencyTx(ctx, tx, rt.OrgID, "runtime", idemKey, rt.ID)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if replayID != "" {
		got, err := s.getRuntime(ctx, rt.OrgID, "", replayID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, domain.Conflict("the Idempotency-Key was used for a runtime that has since been deleted; use a new key")
		}
		return got, true, err
	}
	return rt, false, nil
}

// getRuntime reads a runtime of org (and of workspace, unless ""); anything
// else is store.ErrNotFound.
func (s *Service) getRuntime(ctx context.Context, org, workspace, id string) (*Runtime, error) {
	q := `SELECT ` + runtimeColumns + ` FROM ledger_runtimes WHERE id = ? AND org_id = ?`
	args := []any{id, org}
	if workspace != "" {
		q += ` AND workspace = ?`
		args = append(args, workspace)
	}
	return scanRuntime(s.db.Reader().QueryRowContext(ctx, q, args...))
}

func (s *Service) listRuntimes(ctx context.Context, org, workspace string, after int64, limit int) ([]*Runtime, error) {
	return s.listRuntimesIn(ctx, org, workspace, after, limit, false)
}

// listRuntimesIn lists in creation order, newest first when desc (after is
// then the seq the page starts below; 0 is the start either way).
func (s *Service) listRuntimesIn(ctx context.Context, org, workspace string, after int64, limit int, desc bool) ([]*Runtime, error) {
	cond, order := "seq > ?", "seq"
	if desc {
		order = "seq DESC"
		if after > 0 {
			cond = "seq < ?"
		}
	}
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT `+runtimeColumns+` FROM ledger_runtimes
		WHERE org_id = ? AND workspace = ? AND `+cond+` ORDER BY `+order+` LIMIT ?`, org, workspace, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Runtime
	for rows.Next() {
		rt, err := scanRuntime(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rt)
	}
	return out, rows.Err()
}

// relink moves the runtime's link from old to next (conditional on old, so
// a concurrent start or reset in another process makes it fail: false).
func (s *Service) relink(ctx context.Context, id, old, next string) (bool, error) {
	res, err := s.db.Exec(ctx, `UPDATE ledger_runtimes SET current_record_id = ?,
		last_record_id = CASE WHEN current_record_id <> '' THEN current_record_id ELSE last_record_id END,
		updated_at = ? WHERE id = ? AND current_record_id = ?`, next, s.now().UnixNano(), id, old)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (s *Service) deleteRuntimeRow(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM ledger_runtimes WHERE id = ?`, id)
	return err
}
