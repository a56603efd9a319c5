package store

import (
	"context"
	"database/sql"
	"errors"
)

// OrgCreditsForUpdateTx reads an org's balance inside tx and keeps the org's
// row locked until tx ends, for a settlement that decides what to charge
// from the balance it read. On PostgreSQL (READ COMMITTED) it is SELECT …
// FOR UPDATE: concurrent settlements of one org (several replicas, or a
// pass racing a single settle) then queue on the row instead of each
// computing charges from the same balance and all but one failing their
// debit; a grant waits for the settlement too. SQLite has no FOR UPDATE
// and needs none: DB.Tx's write transactions already run one at a time.
// Only a transaction opened by DB.Tx may call it.
func OrgCreditsForUpdateTx(ctx context.Context, tx *sql.Tx, orgID string) (int64, error) {
	q := `SELECT credits_micro FROM orgs WHERE id = ?`
	if isPostgresTx(tx) {
		q += ` FOR UPDATE`
	}
	var c int64
	err := tx.QueryRowContext(ctx, q, orgID).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return c, err
}

// LockOrgQuotasTx serialises, per org, the transactions that count what an
// org holds against one of its quotas and then add to it (volumes,
// templates, snapshots, template uploads): under PostgreSQL's READ
// COMMITTED two such transactions would otherwise both count the same
// total, both pass, and together exceed the quota. It takes a transaction
// advisory lock (released when tx ends), so it holds whether or not the
// org has a row. SQLite needs none: DB.Tx's write transactions already run
// one at a time. Take it first in the transaction, before any row lock, so
// every quota transaction locks in the same order.
func LockOrgQuotasTx(ctx context.Context, tx *sql.Tx, orgID string) error {
	if !isPostgresTx(tx) {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('dreadnode.org-quotas:' || ?, 0))`, orgID)
	return err
}
