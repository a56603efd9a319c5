-- The output files of a record whose spec names an output directory (a
-- Worlds job, API §16): the directory's contents as a tar, read by the
-- reconciler just before it removes the instance, bounded in size
-- (truncated says entries were left out), kept until the record is
-- purged, so they can be downloaded after the job ended on any replica.

-- +goose Up
CREATE TABLE record_outputs (
	id TEXT PRIMARY KEY,
	archive BLOB NOT NULL,
	bytes INTEGER NOT NULL,
	files INTEGER NOT NULL,
	truncated INTEGER NOT NULL DEFAULT 0,
	saved_at INTEGER NOT NULL
);

-- +goose Down
DROP TABLE record_outputs;
