-- Each attempt of a webhook delivery (API §12; issue 24): a delivery
-- (webhook_deliveries, one per event and webhook, its id reused by every
-- attempt) keeps only its last outcome, so the log of what was tried lives
-- here, one row per POST made: when it started (at), how long it took,
-- the receiver's HTTP status (0: no answer), the error and its class
-- (E2B's errorClass: http_error, dns_error, timeout, transport_error,
-- request_error, canceled), the URL tried and the start of the answer.
-- Written in the transaction that records the attempt's outcome; deleted
-- with its webhook and, past the event retention, by the events sweep.
-- Indexed for the log (a webhook's attempts by seq, E2B's cursor) and for
-- the sweep and E2B's stats (attempts in a time range).

-- +goose Up
CREATE TABLE webhook_attempts (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT NOT NULL UNIQUE,
	delivery_id TEXT NOT NULL,
	webhook_id TEXT NOT NULL,
	at INTEGER NOT NULL,
	duration_ns INTEGER NOT NULL,
	status_code INTEGER NOT NULL DEFAULT 0,
	error TEXT NOT NULL DEFAULT '',
	error_class TEXT NOT NULL DEFAULT '',
	url TEXT NOT NULL DEFAULT '',
	response_body TEXT NOT NULL DEFAULT ''
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, seq);
CREATE INDEX webhook_attempts_webhook ON webhook_attempts (webhook_id, seq);
CREATE INDEX webhook_attempts_at ON webhook_attempts (at);

-- +goose Down
DROP TABLE webhook_attempts;
