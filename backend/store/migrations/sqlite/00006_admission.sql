-- The operators' per-org limits (a NULL column is unlimited), and the queue
-- the admission dispatcher reads in order on every pass. Adopts the legacy
-- migration "0100_admission".

-- +goose Up
CREATE TABLE org_quotas (
	org_id TEXT PRIMARY KEY REFERENCES orgs(id),
	max_running INTEGER,
	max_cpu INTEGER,
	max_memory_mb INTEGER
);

CREATE INDEX sandboxes_queued ON sandboxes (seq) WHERE phase = 'queued';

-- +goose Down
DROP INDEX sandboxes_queued;
DROP TABLE org_quotas;
