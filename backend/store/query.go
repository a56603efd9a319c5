package store

import (
	"context"
	"database/sql"
	"strings"
)

// Querier is what a query runs on: a pool or a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Scanner is one row (sql.Row or sql.Rows).
type Scanner interface{ Scan(dest ...any) error }

// QueryAll runs q and scans every row with scan.
func QueryAll[T any](ctx context.Context, on Querier, scan func(Scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := on.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// QueryStrings runs a query selecting one text column.
func QueryStrings(ctx context.Context, on Querier, q string, args ...any) ([]string, error) {
	return QueryAll(ctx, on, func(s Scanner) (string, error) {
		var v string
		err := s.Scan(&v)
		return v, err
	}, q, args...)
}

// SQLList renders vals (the domain's phase or state names) as a list of SQL
// string literals, for IN (…). Literals rather than bound parameters let
// SQLite match partial indexes whose WHERE names the same phases.
func SQLList[T ~string](vals []T) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
	}
	return strings.Join(parts, ", ")
}
