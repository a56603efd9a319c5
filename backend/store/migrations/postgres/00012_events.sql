-- The PostgreSQL twin of sqlite/00012_events.sql. Lifecycle events (API §12): an outbox written by the transition gate
-- (store/events.go) in the transaction of the change it reports, so no
-- event exists without its change and no change without its event. seq
-- orders them (per sandbox, the order of its changes: the gate holds the
-- record's row while it writes); id is the public, unique event id.
-- Rows older than the retention (DREADNODE_EVENT_RETENTION) are deleted by
-- the events sweep. Numbered 00012 (00011 is left to a concurrent branch).

-- +goose Up
CREATE TABLE events (
	seq BIGSERIAL PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	org_id TEXT NOT NULL,
	sandbox_id TEXT NOT NULL,
	type TEXT NOT NULL,
	at BIGINT NOT NULL,
	template_id TEXT NOT NULL DEFAULT '',
	metadata TEXT NOT NULL DEFAULT '{}',
	cause TEXT NOT NULL DEFAULT '',
	data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_org_seq ON events (org_id, seq);
CREATE INDEX events_sandbox_seq ON events (sandbox_id, seq);
CREATE INDEX events_at ON events (at);

-- +goose Down
DROP TABLE events;
