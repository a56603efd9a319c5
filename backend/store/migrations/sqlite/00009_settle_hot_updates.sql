-- The SQLite twin of postgres/00009_settle_hot_updates.sql, which moves the
-- settle pass's partial index onto a generated column, unsettled, so that
-- charging a running record changes no indexed value (HOT updates on
-- PostgreSQL). SQLite has no HOT updates, but both dialects keep the same
-- columns and the same query (store.UnsettledWhere); SQLite can add only a
-- VIRTUAL generated column to an existing table, computed when read.

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN unsettled INTEGER GENERATED ALWAYS AS (running_since IS NOT NULL OR runtime_ns > billed_ns) VIRTUAL;
DROP INDEX ledger_sandboxes_unsettled;
CREATE INDEX ledger_sandboxes_unsettled ON sandboxes (org_id, seq) WHERE unsettled;

-- +goose Down
DROP INDEX ledger_sandboxes_unsettled;
ALTER TABLE sandboxes DROP COLUMN unsettled;
CREATE INDEX ledger_sandboxes_unsettled ON sandboxes (org_id, seq) WHERE (running_since IS NOT NULL OR runtime_ns > billed_ns);
