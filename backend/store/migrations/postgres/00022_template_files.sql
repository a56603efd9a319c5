-- The files of template builds' COPY steps (API §15), uploaded by hash
-- through a signed link (E2B's SDK flow) and read by the build. They live
-- in the database, not on the disk of the replica that received the
-- upload: a load balancer may send the upload, the status query and the
-- build's start to different replicas, each with a data directory of its
-- own, and a build runs on the replica that received its start. The
-- database is the one store every replica already shares (no object
-- store to configure). An archive is split into chunks (at most 1 MiB
-- each) written in one transaction with its row in template_files, so a
-- failed upload leaves nothing; both go with their template. Their bytes
-- count toward the org's max_template_bytes.

-- +goose Up
CREATE TABLE template_files (
	template_id TEXT NOT NULL,
	hash TEXT NOT NULL,
	org_id TEXT NOT NULL,
	size_bytes BIGINT NOT NULL,
	chunks BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (template_id, hash)
);
CREATE INDEX template_files_org ON template_files (org_id);

CREATE TABLE template_file_chunks (
	template_id TEXT NOT NULL,
	hash TEXT NOT NULL,
	n BIGINT NOT NULL,
	data BYTEA NOT NULL,
	PRIMARY KEY (template_id, hash, n)
);

-- +goose Down
DROP TABLE template_file_chunks;
DROP INDEX template_files_org;
DROP TABLE template_files;
