-- The org's snapshot quotas (admission.Quotas; NULL: unlimited), issue 30:
-- max_snapshots bounds the snapshots the org holds (snapshot templates, as
-- GET /snapshots lists them), max_snapshot_bytes their images' bytes (every
-- build of them), so a tenant cannot fill the host's disk with commits.

-- +goose Up
ALTER TABLE org_quotas ADD COLUMN max_snapshots BIGINT;
ALTER TABLE org_quotas ADD COLUMN max_snapshot_bytes BIGINT;

-- +goose Down
ALTER TABLE org_quotas DROP COLUMN max_snapshot_bytes;
ALTER TABLE org_quotas DROP COLUMN max_snapshots;
