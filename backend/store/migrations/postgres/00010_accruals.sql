-- A record's billing state moves out of the wide sandboxes row into a narrow
-- accruals row. A settle pass charges every running record: on the sandboxes
-- row each charge rewrote the whole row (spec, timeline and endpoints JSON
-- included) and, by raising the record's version, sent a change notification
-- to every replica and made their cached copies cold: 10k records cost
-- 175-190 ms a pass. On accruals a pass is one set-based UPDATE per group of
-- orgs, with the charges computed in SQL (billing/fastpath.go), and leaves
-- the records' versions alone.
--
-- accruals holds what the charge arithmetic reads: the org, the size (the
-- rate), the running time folded so far, since when it runs, its end, and
-- what was billed. The run-state columns mirror the sandboxes row; the only
-- writers of those (InsertRecordTx and the transition gate) write both rows
-- in one transaction. billed_micro and billed_ns live only here and only
-- settlement writes them. version counts the writes of this row, so that a
-- charge computed from a row read earlier applies only if nothing moved it.
-- last_charge_micro is what the last charge added (the set-based UPDATE
-- returns it so the org is debited by exactly the sum applied).
--
-- A record has running time not yet billed while it runs (accruals_running)
-- or while it is stopped with a remainder to close out (accruals_closing).
-- Neither index reads a value a charge of a running record changes:
-- running_since stays, and closing is a generated column (as unsettled was
-- in 00009) that stays false while the record runs. So on PostgreSQL such a
-- charge is a HOT update, and SQLite, which evaluates a partial index's
-- predicate before and after, touches neither index.

-- +goose Up
CREATE TABLE accruals (
	seq BIGINT PRIMARY KEY REFERENCES sandboxes(seq),
	org_id TEXT NOT NULL,
	cpu_count INTEGER NOT NULL DEFAULT 0,
	memory_mb INTEGER NOT NULL DEFAULT 0,
	runtime_ns BIGINT NOT NULL DEFAULT 0,
	running_since BIGINT,
	end_at BIGINT,
	billed_micro BIGINT NOT NULL DEFAULT 0,
	billed_ns BIGINT NOT NULL DEFAULT 0,
	last_charge_micro BIGINT NOT NULL DEFAULT 0,
	version BIGINT NOT NULL DEFAULT 1,
	closing BOOLEAN GENERATED ALWAYS AS (running_since IS NULL AND runtime_ns > billed_ns) STORED
) WITH (fillfactor = 50);
INSERT INTO accruals (seq, org_id, cpu_count, memory_mb, runtime_ns, running_since, end_at, billed_micro, billed_ns)
	SELECT seq, org_id, cpu_count, memory_mb, runtime_ns, running_since, end_at, billed_micro, billed_ns FROM sandboxes;
CREATE INDEX accruals_running ON accruals (org_id, seq) WHERE running_since IS NOT NULL;
CREATE INDEX accruals_closing ON accruals (org_id, seq) WHERE closing;
DROP INDEX ledger_sandboxes_unsettled;
ALTER TABLE sandboxes DROP COLUMN unsettled, DROP COLUMN billed_micro, DROP COLUMN billed_ns;
ALTER TABLE sandboxes RESET (fillfactor);

-- +goose Down
ALTER TABLE sandboxes ADD COLUMN billed_micro BIGINT NOT NULL DEFAULT 0, ADD COLUMN billed_ns BIGINT NOT NULL DEFAULT 0;
UPDATE sandboxes s SET billed_micro = a.billed_micro, billed_ns = a.billed_ns FROM accruals a WHERE a.seq = s.seq;
ALTER TABLE sandboxes SET (fillfactor = 50);
ALTER TABLE sandboxes ADD COLUMN unsettled BOOLEAN GENERATED ALWAYS AS (running_since IS NOT NULL OR runtime_ns > billed_ns) STORED;
CREATE INDEX ledger_sandboxes_unsettled ON sandboxes (org_id, seq) WHERE unsettled;
DROP TABLE accruals;
