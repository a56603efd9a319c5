-- The tables the core owns: orgs, keys, idempotency and the sandbox records.
-- Times are Unix nanoseconds (NULL when unset) so deadlines compare as
-- integers in SQL. Adopts the legacy migration "0001_core".

-- +goose Up
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE orgs (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	credits_micro INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
	hash TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES orgs(id),
	created_at INTEGER NOT NULL
);

CREATE TABLE idempotency (
	org_id TEXT NOT NULL,
	scope TEXT NOT NULL,
	key TEXT NOT NULL,
	object_id TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (org_id, scope, key)
);

CREATE TABLE sandboxes (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT NOT NULL UNIQUE,
	org_id TEXT NOT NULL REFERENCES orgs(id),
	kind TEXT NOT NULL,
	provider TEXT NOT NULL,
	provider_id TEXT NOT NULL DEFAULT '',
	provider_data TEXT NOT NULL DEFAULT '',
	phase TEXT NOT NULL,
	template_id TEXT NOT NULL,
	spec TEXT NOT NULL DEFAULT '{}',
	metadata TEXT NOT NULL DEFAULT '{}',
	cpu_count INTEGER NOT NULL DEFAULT 0,
	memory_mb INTEGER NOT NULL DEFAULT 0,
	auto_pause INTEGER NOT NULL DEFAULT 0,
	auto_resume INTEGER NOT NULL DEFAULT 0,
	timeout_sec INTEGER NOT NULL DEFAULT 0,
	access_token_hash TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	started_at INTEGER,
	last_started_at INTEGER,
	last_paused_at INTEGER,
	killed_at INTEGER,
	end_at INTEGER,
	phase_deadline INTEGER,
	kill_reason TEXT NOT NULL DEFAULT '',
	diagnostic TEXT NOT NULL DEFAULT '',
	exit_code INTEGER,
	timeline TEXT NOT NULL DEFAULT '[]',
	endpoints TEXT NOT NULL DEFAULT '{}',
	billed_micro INTEGER NOT NULL DEFAULT 0,
	billed_ns INTEGER NOT NULL DEFAULT 0,
	runtime_ns INTEGER NOT NULL DEFAULT 0,
	running_since INTEGER,
	sessions INTEGER NOT NULL DEFAULT 0,
	runtime_id TEXT NOT NULL DEFAULT '',
	environment_id TEXT NOT NULL DEFAULT '',
	version INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE sandbox_logs (
	id TEXT PRIMARY KEY,
	logs TEXT NOT NULL,
	saved_at INTEGER NOT NULL
);

CREATE INDEX sandboxes_org_seq ON sandboxes (org_id, seq);

CREATE INDEX sandboxes_phase ON sandboxes (phase, end_at);

-- +goose Down
DROP TABLE sandbox_logs;
DROP TABLE sandboxes;
DROP TABLE idempotency;
DROP TABLE api_keys;
DROP TABLE orgs;
DROP TABLE meta;
