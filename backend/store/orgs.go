package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
)

// Org is a tenant. Its credit balance is kept in millionths of a credit so
// sums are exact.
type Org struct {
	ID           string
	Name         string
	CreditsMicro int64
	CreatedAt    time.Time
}

// EnsureOrg creates the org named name if it does not exist, with the given
// initial balance (only applied when new). It returns the org and whether it
// was created.
func (db *DB) EnsureOrg(ctx context.Context, name string, creditsMicro int64) (*Org, bool, error) {
	var created bool
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO orgs (id, name, credits_micro, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			name, name, creditsMicro, time.Now().UnixNano())
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		created = n == 1
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	org, err := db.OrgByName(ctx, name)
	return org, created, err
}

// OrgByName reads an org by its name (which is also its id).
func (db *DB) OrgByName(ctx context.Context, name string) (*Org, error) {
	var o Org
	var created int64
	err := db.r.QueryRowContext(ctx, `SELECT id, name, credits_micro, created_at FROM orgs WHERE name = ?`, name).
		Scan(&o.ID, &o.Name, &o.CreditsMicro, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	o.CreatedAt = time.Unix(0, created).UTC()
	return &o, nil
}

// EnsureAPIKey binds the key (stored hashed) to org as a full key named
// "bootstrap"; idempotent (a key revoked since stays revoked).
func (db *DB) EnsureAPIKey(ctx context.Context, orgID, key string) error {
	hash := ids.HashSecret(key)
	_, err := db.Exec(ctx, `INSERT INTO api_keys (hash, org_id, created_at, id, name, prefix, scope) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING`,
		hash, orgID, time.Now().UnixNano(), "key_"+hash[:20], bootstrapKeyName, KeyPrefix(key), ScopeFull)
	if err == nil {
		db.prefixes.add(KeyPrefix(key))
	}
	return err
}

// OrgForKey returns the org id owning key: ErrNotFound for an unknown key,
// ErrKeyRevoked or ErrKeyExpired for one that no longer works.
func (db *DB) OrgForKey(ctx context.Context, key string) (string, error) {
	a, err := db.Authenticate(ctx, key)
	return a.OrgID, err
}

// IdempotencyTTL is how long a create's Idempotency-Key is remembered.
const IdempotencyTTL = 24 * time.Hour

// LookupIdempotencyTx returns the object id a previous create with the same
// key made (within IdempotencyTTL), or "". It first takes LockTx on the key,
// held until tx ends: the caller's lookup, create and SaveIdempotencyTx are
// a read then a write with no condition, which SQLite's single writer
// serialises but PostgreSQL (READ COMMITTED) would let two replicas run at
// once, both finding nothing and both creating.
func LookupIdempotencyTx(ctx context.Context, tx *sql.Tx, orgID, scope, key string) (string, error) {
	if err := LockTx(ctx, tx, "idempotency", orgID, scope, key); err != nil {
		return "", err
	}
	var id string
	err := tx.QueryRowContext(ctx, `SELECT object_id FROM idempotency WHERE org_id = ? AND scope = ? AND key = ? AND created_at > ?`,
		orgID, scope, key, time.Now().Add(-IdempotencyTTL).UnixNano()).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// SaveIdempotencyTx remembers that key created objectID.
func SaveIdempotencyTx(ctx context.Context, tx *sql.Tx, orgID, scope, key, objectID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO idempotency (org_id, scope, key, object_id, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (org_id, scope, key) DO UPDATE SET object_id = excluded.object_id, created_at = excluded.created_at`,
		orgID, scope, key, objectID, time.Now().UnixNano())
	return err
}

// GrantCredits adds micro credits to the org named name (an operator action)
// and returns the new balance.
func (db *DB) GrantCredits(ctx context.Context, name string, micro int64) (int64, error) {
	var bal int64
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE orgs SET credits_micro = credits_micro + ? WHERE name = ? RETURNING credits_micro`, micro, name).Scan(&bal)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("organization %q does not exist: %w", name, ErrNotFound)
		}
		return err
	})
	return bal, err
}

// LockTx serialises the transactions that name the same key parts until
// each commits or rolls back, for a read-then-write with no condition in
// its UPDATE (a check of counts or quotas before an insert, an idempotency
// lookup). On PostgreSQL it takes a transaction-scoped advisory lock on a
// 64-bit hash of the parts; on SQLite it does nothing, since Tx's write
// transactions already run one at a time. Only a transaction opened by
// DB.Tx may call it (a *sql.Tx of the reader pool is not serialised on
// SQLite).
func LockTx(ctx context.Context, tx *sql.Tx, parts ...string) error {
	if !isPostgresTx(tx) {
		return nil
	}
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(h.Sum64()))
	return err
}
