-- The output files of a record whose spec names an output directory (a
-- Worlds job, API §16): the directory's contents as a tar, read by the
-- reconciler just before it removes the instance, bounded in size
-- (truncated says entries were left out), kept until the record is
-- purged, so they can be downloaded after the job ended on any replica.

-- +goose Up
CREATE TABLE record_outputs (
	id TEXT PRIMARY KEY,
	archive BYTEA NOT NULL,
	bytes BIGINT NOT NULL,
	files BIGINT NOT NULL,
	truncated BIGINT NOT NULL DEFAULT 0,
	saved_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE record_outputs;
