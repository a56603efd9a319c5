-- Serves the lists by state (GET /sandboxes?state=…, the ledger): one
-- phase's records of an org in seq order straight from the index.

-- The PostgreSQL twin of sqlite/00002_list_by_phase.sql, statement for statement.

-- +goose Up
CREATE INDEX sandboxes_org_phase_seq ON sandboxes (org_id, phase, seq);

-- +goose Down
DROP INDEX sandboxes_org_phase_seq;
