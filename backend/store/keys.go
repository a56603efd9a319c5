package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
)

// Key scopes: a full key may do anything its org may; a read key only reads.
const (
	ScopeFull = "full"
	ScopeRead = "read"
)

// Errors of Authenticate besides ErrNotFound (an unknown key).
var (
	ErrKeyRevoked = errors.New("the API key was revoked")
	ErrKeyExpired = errors.New("the API key has expired")
)

// APIKey is an org's key as stored: never the secret, only its hash and
// its first characters (Prefix) so people can tell their keys apart.
type APIKey struct {
	ID         string
	OrgID      string
	Name       string
	Prefix     string
	Scope      string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	hash       string
}

// KeyPrefix is the part of a secret kept in clear: up to 12 characters,
// and never more than a third of it (an operator-chosen bootstrap key may
// be short).
func KeyPrefix(secret string) string {
	return secret[:min(12, len(secret)/3)]
}

const keyColumns = `id, org_id, name, prefix, scope, created_at, last_used_at, expires_at, revoked_at, hash`

func scanKey(row interface{ Scan(...any) error }) (*APIKey, error) {
	var k APIKey
	var created int64
	var used, expires, revoked sql.NullInt64
	if err := row.Scan(&k.ID, &k.OrgID, &k.Name, &k.Prefix, &k.Scope, &created, &used, &expires, &revoked, &k.hash); err != nil {
		return nil, err
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	k.LastUsedAt, k.ExpiresAt, k.RevokedAt = keyTime(used), keyTime(expires), keyTime(revoked)
	return &k, nil
}

func keyTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.Unix(0, v.Int64).UTC()
	return &t
}

func keyTimeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// CreateAPIKey stores k (its ID, OrgID, Name, Scope and ExpiresAt) for the
// secret, of which only the hash and the prefix are kept. The org must
// exist.
func (db *DB) CreateAPIKey(ctx context.Context, k *APIKey, secret string) error {
	k.Prefix, k.CreatedAt = KeyPrefix(secret), time.Now().UTC()
	_, err := db.Exec(ctx, `INSERT INTO api_keys (hash, org_id, created_at, id, name, prefix, scope, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		ids.HashSecret(secret), k.OrgID, k.CreatedAt.UnixNano(), k.ID, k.Name, k.Prefix, k.Scope, keyTimeArg(k.ExpiresAt))
	if err == nil {
		db.prefixes.add(k.Prefix)
	}
	return err
}

// APIKeys lists the org's keys that are not revoked, oldest first.
func (db *DB) APIKeys(ctx context.Context, orgID string) ([]*APIKey, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE org_id = ? AND revoked_at IS NULL ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := []*APIKey{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// RevokeAPIKey revokes the org's key id (ErrNotFound if the org has no
// such key; revoking a revoked key again is no error). This replica's key
// cache forgets it at once; on PostgreSQL the others do when the change
// notification reaches them (migration 00011).
func (db *DB) RevokeAPIKey(ctx context.Context, orgID, id string) error {
	var hash string
	err := db.r.QueryRowContext(ctx, `SELECT hash FROM api_keys WHERE org_id = ? AND id = ?`, orgID, id).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("API key %q was not found: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL`, time.Now().UnixNano(), hash); err != nil {
		return err
	}
	db.keys.drop(hash)
	db.keyWatch.fire(hash) // what is open with it ends now
	return nil
}

// RetireBootstrapKeys revokes the org's other bootstrap keys: the
// operator replaced DREADNODE_BOOTSTRAP_API_KEY, so the old one must stop
// working rather than keep answering beside the new one.
func (db *DB) RetireBootstrapKeys(ctx context.Context, orgID, keep string) (int64, error) {
	hashes, err := db.keyHashes(ctx, `SELECT hash FROM api_keys WHERE org_id = ? AND name = ? AND hash <> ? AND revoked_at IS NULL`,
		orgID, bootstrapKeyName, ids.HashSecret(keep))
	if err != nil {
		return 0, err
	}
	for _, h := range hashes {
		if _, err := db.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL`, time.Now().UnixNano(), h); err != nil {
			return 0, err
		}
		db.keys.drop(h)
		db.keyWatch.fire(h)
	}
	return int64(len(hashes)), nil
}

// keyHashes reads the hashes query selects.
func (db *DB) keyHashes(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hashes []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, err
		}
		hashes = append(hashes, h)
	}
	return hashes, rows.Err()
}

const bootstrapKeyName = "bootstrap"

// KeyAuth is what a request's key grants.
type KeyAuth struct {
	ID        string
	OrgID     string
	Scope     string
	Prefix    string
	ExpiresAt *time.Time // nil: never
	// Hash is the key's hash (ids.HashSecret): what WatchKey watches.
	Hash string
}

// keyTouchEvery bounds how often a key's last_used_at is written: once a
// minute at most, not per request.
const keyTouchEvery = time.Minute

// Authenticate returns what key grants: ErrNotFound for an unknown key,
// ErrKeyRevoked or ErrKeyExpired for one that no longer works. Known keys
// are cached (keycache.go), so the hot path touches no database.
func (db *DB) Authenticate(ctx context.Context, key string) (KeyAuth, error) {
	hash := ids.HashSecret(key)
	e, ok := db.keys.get(hash)
	if !ok {
		gen := db.keys.generation()
		db.keyLookups.Add(1)
		k, err := scanKey(db.r.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`, hash))
		if errors.Is(err, sql.ErrNoRows) {
			return KeyAuth{}, ErrNotFound
		}
		if err != nil {
			return KeyAuth{}, err
		}
		e = newKeyEntry(k)
		if db.Listening() { // on PostgreSQL, only while revocations can reach the cache
			db.keys.put(hash, e, gen)
		}
	}
	if e.revoked {
		return KeyAuth{}, ErrKeyRevoked
	}
	now := time.Now()
	if e.expires != 0 && now.UnixNano() >= e.expires {
		return KeyAuth{}, ErrKeyExpired
	}
	if last := e.touched.Load(); now.UnixNano()-last >= int64(keyTouchEvery) && e.touched.CompareAndSwap(last, now.UnixNano()) {
		// Best effort: a failed write only leaves last_used_at older.
		_, _ = db.Exec(context.WithoutCancel(ctx), `UPDATE api_keys SET last_used_at = ? WHERE hash = ?`, now.UnixNano(), hash)
	}
	return e.auth, nil
}

// CachedAuth is Authenticate from the cache alone: ok only for a cached
// key that still works. It never touches the database (an address over
// its limit of refused keys is served from it).
func (db *DB) CachedAuth(key string) (KeyAuth, bool) {
	e, ok := db.keys.get(ids.HashSecret(key))
	if !ok || e.revoked || (e.expires != 0 && time.Now().UnixNano() >= e.expires) {
		return KeyAuth{}, false
	}
	return e.auth, true
}

// KeyLookups counts the key lookups that went to the database (cache
// misses, and MayBeKey's loads of the prefixes), for tests and metrics.
func (db *DB) KeyLookups() int64 { return db.keyLookups.Load() }

// Orgs lists every org, by name.
func (db *DB) Orgs(ctx context.Context) ([]*Org, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, name, credits_micro, created_at FROM orgs ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	orgs := []*Org{}
	for rows.Next() {
		var o Org
		var created int64
		if err := rows.Scan(&o.ID, &o.Name, &o.CreditsMicro, &created); err != nil {
			return nil, err
		}
		o.CreatedAt = time.Unix(0, created).UTC()
		orgs = append(orgs, &o)
	}
	return orgs, rows.Err()
}
