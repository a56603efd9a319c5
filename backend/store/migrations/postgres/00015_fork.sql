-- Fork (API §14, issue 30): a sandbox or task environment forked from
-- another is a record of its own that names its parent (parent_id, the
-- parent's record id) and the checkpoint it starts from (checkpoint: the id
-- the checkpoint's images are labelled with). A checkpoint's images are
-- removed once no live record names it, which the partial index finds
-- without reading the records that were never forked ('' for them).

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN checkpoint TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_checkpoint ON sandboxes (checkpoint, phase) WHERE checkpoint <> '';

-- +goose Down
DROP INDEX sandboxes_checkpoint;
ALTER TABLE sandboxes DROP COLUMN checkpoint;
ALTER TABLE sandboxes DROP COLUMN parent_id;
