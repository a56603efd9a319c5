package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// NextExpiry is the earliest endAt after now of a record (other than a group
// member's, sandbox.GroupMemberKinds) whose TTL the reconciler enforces, or the zero time if none: the
// reconciler sweeps then rather than up to an interval later. One index
// seek per phase (sandboxes_phase is on phase, end_at), so it costs the same
// with 10 or 100k live records.
func (db *DB) NextExpiry(ctx context.Context, now time.Time) (time.Time, error) {
	var next time.Time
	for _, p := range expirable {
		var at int64
		err := db.r.QueryRowContext(ctx, `SELECT end_at FROM sandboxes WHERE phase = ? AND end_at > ? AND kind NOT IN (`+SQLList(sandbox.GroupMemberKinds)+`)
			ORDER BY end_at LIMIT 1`, string(p), now.UnixNano()).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		if t := time.Unix(0, at).UTC(); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next, nil
}
