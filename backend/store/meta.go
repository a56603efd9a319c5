package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// DeploymentID is a random id made when the database was created. Every
// instance a backend creates carries it, so a backend only ever adopts or
// removes instances of its own database.
func (db *DB) DeploymentID(ctx context.Context) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	if _, err := db.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('deployment_id', ?) ON CONFLICT (key) DO NOTHING`, hex.EncodeToString(b[:])); err != nil {
		return "", err
	}
	var id string
	err := db.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'deployment_id'`).Scan(&id)
	return id, err
}

// EnvdTokenSeed is a random secret made once per database (32 bytes, hex),
// the key envd access tokens are derived from (lifecycle.EnvdToken): every
// replica of a deployment derives the same token for a sandbox, and a
// token never needs storing. It is never logged nor answered.
func (db *DB) EnvdTokenSeed(ctx context.Context) (string, error) {
	return db.seed(ctx, "envd_token_seed")
}

// AgentTokenSeed is a random secret made once per database (32 bytes,
// hex), the key the Docker provider derives its in-container agents'
// tokens from (so that no token is kept where the engine shows it, and
// every replica derives the same). It is never logged nor answered.
func (db *DB) AgentTokenSeed(ctx context.Context) (string, error) {
	return db.seed(ctx, "agent_token_seed")
}

// seed is the random secret of key in meta, made on first use.
func (db *DB) seed(ctx context.Context, key string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	if _, err := db.Exec(ctx, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, key, hex.EncodeToString(b[:])); err != nil {
		return "", err
	}
	var seed string
	err := db.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&seed)
	return seed, err
}
