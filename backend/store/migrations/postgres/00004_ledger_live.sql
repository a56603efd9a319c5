-- A partial index of live records per org: the kill of a broke org's records
-- and the broke-org sweep read only live rows.

-- The PostgreSQL twin of sqlite/00004_ledger_live.sql, statement for statement.

-- +goose Up
CREATE INDEX ledger_sandboxes_live ON sandboxes (org_id, seq) WHERE phase IN ('pending', 'creating', 'running', 'pausing', 'paused', 'resuming');

-- +goose Down
DROP INDEX ledger_sandboxes_live;
