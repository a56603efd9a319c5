-- Templates as resources (API §15) and snapshots (§14): an org's own
-- templates, each with its builds (an image the backend made: a template
-- build, or a sandbox's filesystem committed by a snapshot), its tags (a
-- name pointing at one build; "default" is the newest successful build and
-- is never deleted) and the log of each build. A template is its org's
-- only: every query names the org. Per-org limits on their count and bytes
-- beside §7's quotas (template_quotas; no row is unlimited).

-- +goose Up
CREATE TABLE templates (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	alias TEXT,
	kind TEXT NOT NULL,
	cpu_count INTEGER NOT NULL,
	memory_mb INTEGER NOT NULL,
	parent TEXT NOT NULL DEFAULT '',
	source_sandbox TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX templates_org_alias ON templates (org_id, alias);
CREATE INDEX templates_org_created ON templates (org_id, created_at);

CREATE TABLE template_builds (
	id TEXT PRIMARY KEY,
	template_id TEXT NOT NULL,
	org_id TEXT NOT NULL,
	status TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	reason_step TEXT NOT NULL DEFAULT '',
	spec TEXT NOT NULL DEFAULT '{}',
	image TEXT NOT NULL DEFAULT '',
	size_bytes INTEGER NOT NULL DEFAULT 0,
	cpu_count INTEGER NOT NULL,
	memory_mb INTEGER NOT NULL,
	start_cmd TEXT NOT NULL DEFAULT '',
	ready_cmd TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	finished_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX template_builds_template ON template_builds (template_id, created_at);
CREATE INDEX template_builds_org ON template_builds (org_id, status);

CREATE TABLE template_tags (
	template_id TEXT NOT NULL,
	tag TEXT NOT NULL,
	build_id TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (template_id, tag)
);

CREATE TABLE template_build_logs (
	build_id TEXT NOT NULL,
	n INTEGER NOT NULL,
	at INTEGER NOT NULL,
	level TEXT NOT NULL,
	step TEXT NOT NULL DEFAULT '',
	message TEXT NOT NULL,
	PRIMARY KEY (build_id, n)
);

CREATE TABLE template_quotas (
	org_id TEXT PRIMARY KEY,
	max_templates INTEGER,
	max_template_bytes INTEGER
);

-- +goose Down
DROP TABLE template_quotas;
DROP TABLE template_build_logs;
DROP TABLE template_tags;
DROP INDEX template_builds_org;
DROP INDEX template_builds_template;
DROP TABLE template_builds;
DROP INDEX templates_org_created;
DROP INDEX templates_org_alias;
DROP TABLE templates;
