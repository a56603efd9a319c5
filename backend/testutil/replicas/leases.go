package replicas

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leases describes, for a failure message, who holds each record now: its
// phase, lease owner, epoch and expiry relative to the database's clock.
// It reads the table directly, since no API shows leases.
func (s *Set) Leases(t testing.TB, ids []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		return fmt.Sprintf("(cannot read leases: %v)", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id, phase, COALESCE(lease_owner, '-'), lease_epoch,
		COALESCE(lease_expires - (EXTRACT(EPOCH FROM clock_timestamp()) * 1e9)::BIGINT, 0)
		FROM sandboxes WHERE id = ANY($1) ORDER BY id`, ids)
	if err != nil {
		return fmt.Sprintf("(cannot read leases: %v)", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, phase, owner string
		var epoch, left int64
		if err := rows.Scan(&id, &phase, &owner, &epoch, &left); err != nil {
			return fmt.Sprintf("(cannot read leases: %v)", err)
		}
		fmt.Fprintf(&b, "%s phase=%s owner=%s epoch=%d expires_in=%s\n", id, phase, owner, epoch, time.Duration(left).Round(time.Millisecond))
	}
	return b.String()
}
