// Package admission decides when a sandbox create may start (shared/API.md
// §7): per-org quotas set by operators, each provider's capacity, and a fair
// queue kept in the database for the creates that fit but not now.
package admission

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Quotas are an org's limits; nil is unlimited (the document's Quotas).
type Quotas = apitypes.Quotas

// Use is the compute an org (or a provider) holds: every record from the
// moment it is admitted until its instance is removed (pending, creating,
// running, pausing, paused, resuming, stopping). A paused sandbox keeps its
// slot: on Docker its memory stays allocated, and resuming must not fail for
// want of room. Its fields are the document's QuotaUse, which shows it.
type Use apitypes.QuotaUse

func (u Use) plus(it Item) Use {
	return Use{Sandboxes: u.Sandboxes + 1, CPU: u.CPU + it.CPU, MemoryMB: u.MemoryMB + it.MemoryMB}
}

// holding is the SQL list of the phases whose records hold compute.
var holding = "(" + store.SQLList(sandbox.Holding) + ")"

// isQueued selects queued records. It is rendered as a literal, like the
// WHERE of the partial index sandboxes_queued, so SQLite uses that index.
var isQueued = "phase = " + store.SQLList([]sandbox.Phase{sandbox.PhaseQueued})

// Capacity is what one provider can run at once; 0 is unlimited. Its
// fields are the document's ProviderCapacity, which shows it.
type Capacity apitypes.ProviderCapacity

// QuotasOf reads org's quotas (all unlimited when none were set).
func QuotasOf(ctx context.Context, q querier, org string) (Quotas, error) {
	var out Quotas
	var run, cpu, mem, vols, volBytes, snaps, snapBytes sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT max_running, max_cpu, max_memory_mb, max_volumes, max_volume_bytes, max_snapshots, max_snapshot_bytes FROM org_quotas WHERE org_id = ?`, org).
		Scan(&run, &cpu, &mem, &vols, &volBytes, &snaps, &snapBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("reading the quotas of %s: %w", org, err)
	}
	out.MaxRunning, out.MaxCPU, out.MaxMemoryMB = intPtr(run), intPtr(cpu), intPtr(mem)
	out.MaxVolumes = intPtr(vols)
	if volBytes.Valid {
		out.MaxVolumeBytes = &volBytes.Int64
	}
	out.MaxSnapshots = intPtr(snaps)
	if snapBytes.Valid {
		out.MaxSnapshotBytes = &snapBytes.Int64
	}
	return out, nil
}

func intPtr(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int64)
	return &v
}

func nullable(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// negative names the first of q's limits below 0 ("" when none is) and
// its value: every limit is 0 or more, or null for unlimited.
func negative(q Quotas) (string, int64) {
	for _, l := range []struct {
		name string
		v    *int
	}{{"max_running", q.MaxRunning}, {"max_cpu", q.MaxCPU}, {"max_memory_mb", q.MaxMemoryMB}, {"max_volumes", q.MaxVolumes}, {"max_snapshots", q.MaxSnapshots}} {
		if l.v != nil && *l.v < 0 {
			return l.name, int64(*l.v)
		}
	}
	for _, l := range []struct {
		name string
		v    *int64
	}{{"max_volume_bytes", q.MaxVolumeBytes}, {"max_snapshot_bytes", q.MaxSnapshotBytes}} {
		if l.v != nil && *l.v < 0 {
			return l.name, *l.v
		}
	}
	return "", 0
}

func nullable64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// SetQuotas replaces org's quotas (nil fields become unlimited). The org must
// exist: store.ErrNotFound otherwise.
func SetQuotas(ctx context.Context, db *store.DB, org string, q Quotas) error {
	if name, bad := negative(q); name != "" {
		return fmt.Errorf("%s: must be 0 or more (omit it for unlimited), got %d", name, bad)
	}
	if _, err := db.OrgByName(ctx, org); err != nil {
		return err
	}
	return db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO org_quotas (org_id, max_running, max_cpu, max_memory_mb, max_volumes, max_volume_bytes, max_snapshots, max_snapshot_bytes)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org_id) DO UPDATE SET max_running = excluded.max_running, max_cpu = excluded.max_cpu, max_memory_mb = excluded.max_memory_mb,
			max_volumes = excluded.max_volumes, max_volume_bytes = excluded.max_volume_bytes,
			max_snapshots = excluded.max_snapshots, max_snapshot_bytes = excluded.max_snapshot_bytes`,
			org, nullable(q.MaxRunning), nullable(q.MaxCPU), nullable(q.MaxMemoryMB), nullable(q.MaxVolumes), nullable64(q.MaxVolumeBytes),
			nullable(q.MaxSnapshots), nullable64(q.MaxSnapshotBytes))
		return err
	})
}

// usageKey is an org (or "") and a provider (or "").
type usageKey struct{ org, provider string }

// querier is a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// usageOf sums the compute held per org (key {org, ""}) and per provider
// (key {"", provider}).
func usageOf(ctx context.Context, q querier) (map[usageKey]Use, error) {
	rows, err := q.QueryContext(ctx, `SELECT org_id, provider, COUNT(*), COALESCE(SUM(cpu_count), 0), COALESCE(SUM(memory_mb), 0)
		FROM sandboxes WHERE phase IN `+holding+` GROUP BY org_id, provider`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[usageKey]Use{}
	for rows.Next() {
		var k usageKey
		var u Use
		if err := rows.Scan(&k.org, &k.provider, &u.Sandboxes, &u.CPU, &u.MemoryMB); err != nil {
			return nil, err
		}
		add(out, usageKey{org: k.org}, u)
		add(out, usageKey{provider: k.provider}, u)
	}
	return out, rows.Err()
}

func add(m map[usageKey]Use, k usageKey, u Use) {
	c := m[k]
	m[k] = Use{Sandboxes: c.Sandboxes + u.Sandboxes, CPU: c.CPU + u.CPU, MemoryMB: c.MemoryMB + u.MemoryMB}
}

// UseOf is the compute org holds now.
func UseOf(ctx context.Context, q querier, org string) (Use, error) {
	var u Use
	err := q.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(cpu_count), 0), COALESCE(SUM(memory_mb), 0)
		FROM sandboxes WHERE org_id = ? AND phase IN `+holding, org).Scan(&u.Sandboxes, &u.CPU, &u.MemoryMB)
	return u, err
}
