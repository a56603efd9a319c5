-- The ledger's runtimes, and a partial index that keeps the settle pass's
-- scan proportional to unsettled records (its WHERE is store.UnsettledWhere,
-- which a test holds equal). Adopts the legacy migration "ledger_0001".

-- +goose Up
CREATE TABLE ledger_runtimes (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT NOT NULL UNIQUE,
	org_id TEXT NOT NULL REFERENCES orgs(id),
	workspace TEXT NOT NULL,
	name TEXT NOT NULL,
	template_id TEXT NOT NULL,
	cpu_count INTEGER NOT NULL DEFAULT 0,
	memory_mb INTEGER NOT NULL DEFAULT 0,
	timeout_sec INTEGER NOT NULL,
	env_vars TEXT NOT NULL DEFAULT '{}',
	metadata TEXT NOT NULL DEFAULT '{}',
	current_record_id TEXT NOT NULL DEFAULT '',
	last_record_id TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (org_id, workspace, name)
);

CREATE INDEX ledger_runtimes_ws ON ledger_runtimes (org_id, workspace, seq);

CREATE INDEX ledger_sandboxes_unsettled ON sandboxes (org_id, seq) WHERE (running_since IS NOT NULL OR runtime_ns > billed_ns);

-- +goose Down
DROP INDEX ledger_sandboxes_unsettled;
DROP TABLE ledger_runtimes;
