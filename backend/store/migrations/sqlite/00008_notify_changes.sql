-- The SQLite twin of postgres/00007_notify_changes.sql: nothing to do. One
-- process owns a SQLite file, so no other replica needs telling of its
-- writes; the version exists so both dialects hold the same numbers.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
