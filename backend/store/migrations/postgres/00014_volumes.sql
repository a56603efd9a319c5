-- The PostgreSQL twin of sqlite/00014_volumes.sql. Org volumes (API.md §14, issue 30): named, per org, persistent until
-- deleted, mountable by several sandboxes of the org at once. The
-- provider's volume is named from the id (Docker: dnvol-<id>; E2B: a team
-- volume dn-<scope>-vol-<id>), so a row and its provider volume find each
-- other without a lookup. provider is the provider holding it. bytes is the
-- last measured disk use (bytes_at when, Unix nanoseconds; NULL: never
-- measured). The name is unique per org.

-- +goose Up
CREATE TABLE volumes (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	name TEXT NOT NULL,
	provider TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	bytes BIGINT NOT NULL DEFAULT 0,
	bytes_at BIGINT
);
CREATE UNIQUE INDEX volumes_org_name ON volumes (org_id, name);
-- The org's volume quotas (admission.Quotas; NULL: unlimited).
ALTER TABLE org_quotas ADD COLUMN max_volumes BIGINT;
ALTER TABLE org_quotas ADD COLUMN max_volume_bytes BIGINT;

-- +goose Down
ALTER TABLE org_quotas DROP COLUMN max_volume_bytes;
ALTER TABLE org_quotas DROP COLUMN max_volumes;
DROP INDEX volumes_org_name;
DROP TABLE volumes;
