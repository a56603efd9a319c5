-- The schema as the backend built it before goose, copied verbatim from the
-- per-package statements its db.Migrate calls applied (store, admission,
-- ledger, tasks, in the server's start-up order). Each "-- migration: NAME"
-- starts one recorded name in schema_migrations; statements end with ";" on
-- its own line. Kept so the adoption test builds a database the old way.

-- migration: 0001_core
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)
;
CREATE TABLE orgs (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL UNIQUE,
		credits_micro INTEGER NOT NULL DEFAULT 0,
		created_at INTEGER NOT NULL
	)
;
CREATE TABLE api_keys (
		hash TEXT PRIMARY KEY,
		org_id TEXT NOT NULL REFERENCES orgs(id),
		created_at INTEGER NOT NULL
	)
;
CREATE TABLE idempotency (
		org_id TEXT NOT NULL,
		scope TEXT NOT NULL,
		key TEXT NOT NULL,
		object_id TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (org_id, scope, key)
	)
;
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
	)
;
CREATE TABLE sandbox_logs (
		id TEXT PRIMARY KEY,
		logs TEXT NOT NULL,
		saved_at INTEGER NOT NULL
	)
;
CREATE INDEX sandboxes_org_seq ON sandboxes (org_id, seq)
;
CREATE INDEX sandboxes_phase ON sandboxes (phase, end_at)
;

-- migration: 0002_list_by_phase
CREATE INDEX sandboxes_org_phase_seq ON sandboxes (org_id, phase, seq)
;

-- migration: 0100_admission
CREATE TABLE org_quotas (
		org_id TEXT PRIMARY KEY REFERENCES orgs(id),
		max_running INTEGER,
		max_cpu INTEGER,
		max_memory_mb INTEGER
	)
;
CREATE INDEX sandboxes_queued ON sandboxes (seq) WHERE phase = 'queued'
;

-- migration: ledger_0001
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
	)
;
CREATE INDEX ledger_runtimes_ws ON ledger_runtimes (org_id, workspace, seq)
;
CREATE INDEX ledger_sandboxes_unsettled ON sandboxes (org_id, seq) WHERE (running_since IS NOT NULL OR runtime_ns > billed_ns)
;

-- migration: ledger_0002
CREATE INDEX ledger_sandboxes_live ON sandboxes (org_id, seq) WHERE phase IN ('pending', 'creating', 'running', 'pausing', 'paused', 'resuming')
;

-- migration: tasks_0001_environments
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
	)
;
CREATE INDEX task_environments_ws ON task_environments (org_id, workspace, seq)
;
CREATE INDEX task_environments_state ON task_environments (state)
;
