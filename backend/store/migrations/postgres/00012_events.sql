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

-- Webhooks (API §12): an org's subscriptions (from_seq: the last event
-- written before it was registered; it gets the later ones), the fan-out
-- position (the
-- last event seq turned into deliveries; one replica advances it at a
-- time, conditionally on the value it read), and one delivery per event
-- and webhook (its id is reused by every attempt), claimed by a replica
-- until claim_expires so a replica dying mid-delivery only delays it.
CREATE TABLE webhooks (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	url TEXT NOT NULL,
	enabled BIGINT NOT NULL DEFAULT 1,
	events TEXT NOT NULL DEFAULT '[]',
	secret TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	disabled_reason TEXT NOT NULL DEFAULT '',
	from_seq BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX webhooks_org ON webhooks (org_id);
CREATE TABLE webhook_fanout (
	id BIGINT PRIMARY KEY,
	seq BIGINT NOT NULL
);
INSERT INTO webhook_fanout (id, seq) VALUES (1, 0);
CREATE TABLE webhook_deliveries (
	id TEXT PRIMARY KEY,
	webhook_id TEXT NOT NULL,
	event_seq BIGINT NOT NULL,
	event_id TEXT NOT NULL,
	event_type TEXT NOT NULL,
	sandbox_id TEXT NOT NULL,
	body TEXT NOT NULL,
	status TEXT NOT NULL,
	attempts BIGINT NOT NULL DEFAULT 0,
	created_at BIGINT NOT NULL,
	next_at BIGINT NOT NULL,
	claimed_by TEXT,
	claim_expires BIGINT,
	last_status BIGINT NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	delivered_at BIGINT
);
CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries (webhook_id, event_seq);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_at);
CREATE INDEX webhook_deliveries_chain ON webhook_deliveries (webhook_id, sandbox_id, event_seq);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_fanout;
DROP TABLE webhooks;
DROP TABLE events;
