-- The SQLite twin of postgres/00010_accruals.sql (read it for why): a
-- record's billing state moves into a narrow accruals row, so that a settle
-- pass rewrites small rows in one statement instead of every wide sandboxes
-- row one by one. unsettled is VIRTUAL here (SQLite has no HOT updates).

-- +goose Up
CREATE TABLE accruals (
	seq INTEGER PRIMARY KEY REFERENCES sandboxes(seq),
	org_id TEXT NOT NULL,
	cpu_count INTEGER NOT NULL DEFAULT 0,
	memory_mb INTEGER NOT NULL DEFAULT 0,
	runtime_ns INTEGER NOT NULL DEFAULT 0,
	running_since INTEGER,
	end_at INTEGER,
	billed_micro INTEGER NOT NULL DEFAULT 0,
	billed_ns INTEGER NOT NULL DEFAULT 0,
	last_charge_micro INTEGER NOT NULL DEFAULT 0,
	version INTEGER NOT NULL DEFAULT 1,
	closing INTEGER GENERATED ALWAYS AS (running_since IS NULL AND runtime_ns > billed_ns) VIRTUAL
);
INSERT INTO accruals (seq, org_id, cpu_count, memory_mb, runtime_ns, running_since, end_at, billed_micro, billed_ns)
	SELECT seq, org_id, cpu_count, memory_mb, runtime_ns, running_since, end_at, billed_micro, billed_ns FROM sandboxes;
CREATE INDEX accruals_running ON accruals (org_id, seq) WHERE running_since IS NOT NULL;
CREATE INDEX accruals_closing ON accruals (org_id, seq) WHERE closing;
DROP INDEX ledger_sandboxes_unsettled;
ALTER TABLE sandboxes DROP COLUMN unsettled;
ALTER TABLE sandboxes DROP COLUMN billed_micro;
ALTER TABLE sandboxes DROP COLUMN billed_ns;

-- +goose Down
ALTER TABLE sandboxes ADD COLUMN billed_micro INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN billed_ns INTEGER NOT NULL DEFAULT 0;
UPDATE sandboxes SET billed_micro = (SELECT a.billed_micro FROM accruals a WHERE a.seq = sandboxes.seq),
	billed_ns = (SELECT a.billed_ns FROM accruals a WHERE a.seq = sandboxes.seq)
	WHERE seq IN (SELECT seq FROM accruals);
ALTER TABLE sandboxes ADD COLUMN unsettled INTEGER GENERATED ALWAYS AS (running_since IS NOT NULL OR runtime_ns > billed_ns) VIRTUAL;
CREATE INDEX ledger_sandboxes_unsettled ON sandboxes (org_id, seq) WHERE unsettled;
DROP TABLE accruals;
