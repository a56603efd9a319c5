-- Task environments (backend/tasks). Adopts the legacy migration
-- "tasks_0001_environments".

-- +goose Up
CREATE TABLE task_environments (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT NOT NULL UNIQUE,
	org_id TEXT NOT NULL REFERENCES orgs(id),
	workspace TEXT NOT NULL,
	task_ref TEXT NOT NULL,
	task_org TEXT NOT NULL,
	task_name TEXT NOT NULL,
	task_version TEXT NOT NULL,
	inputs TEXT NOT NULL DEFAULT '{}',
	resolved_inputs TEXT NOT NULL DEFAULT '{}',
	timeout_sec INTEGER NOT NULL,
	project_id TEXT,
	secret_ids TEXT NOT NULL DEFAULT '[]',
	state TEXT NOT NULL,
	error TEXT NOT NULL DEFAULT '',
	service_urls TEXT NOT NULL DEFAULT '{}',
	containers TEXT NOT NULL DEFAULT '{}',
	one_shots TEXT NOT NULL DEFAULT '[]',
	instruction TEXT NOT NULL DEFAULT '',
	execute_service TEXT NOT NULL DEFAULT '',
	token_hash TEXT NOT NULL,
	record_id TEXT NOT NULL,
	deadline INTEGER,
	expires_at INTEGER,
	timeline TEXT NOT NULL DEFAULT '[]',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	version INTEGER NOT NULL DEFAULT 1
);

CREATE INDEX task_environments_ws ON task_environments (org_id, workspace, seq);

CREATE INDEX task_environments_state ON task_environments (state);

-- +goose Down
DROP TABLE task_environments;
