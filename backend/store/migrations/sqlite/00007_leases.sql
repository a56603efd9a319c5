-- Leases: which replica drives a record now, and the fencing epoch its
-- writes carry (store/lease.go, DESIGN.md "Replicas and leases").
-- lease_owner is the replica id holding the record (NULL: nobody),
-- lease_expires when the hold ends unless renewed (Unix nanoseconds, on the
-- database's clock on PostgreSQL), lease_epoch counts the hand-overs: a
-- claim by a new holder increments it, and a fenced write requires the
-- epoch its holder claimed, so a replica that lost the record changes no row.
-- They are not part of a record's version: a claim must not make an API
-- transition racing it fail with a spurious conflict.
-- No index on them: the renewal names the records it extends (by id), and
-- an index on a lease column would make every claim and release on
-- PostgreSQL a non-HOT update, rewriting every index of the table.

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN lease_owner TEXT;
ALTER TABLE sandboxes ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN lease_expires BIGINT;

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN lease_expires;
ALTER TABLE sandboxes DROP COLUMN lease_epoch;
ALTER TABLE sandboxes DROP COLUMN lease_owner;
