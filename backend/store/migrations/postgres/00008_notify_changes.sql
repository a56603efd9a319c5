-- Replicas sharing this database learn of each other's writes by
-- LISTEN/NOTIFY (store/listen.go): every insert of a sandboxes row and every
-- update that changes its version notifies 'dreadnode_records' with
-- "<id> <version> <phase>", and every write of a task environment notifies
-- 'dreadnode_task_envs' with its id. Triggers rather than a pg_notify beside
-- each statement, so no write path (a bulk settlement, a lease take-over, SQL
-- added later) can forget it. The notification is queued inside the writing
-- transaction and delivered only at its commit, in commit order.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION dreadnode_notify_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('dreadnode_records', NEW.id || ' ' || NEW.version || ' ' || NEW.phase);
	RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION dreadnode_notify_task_env() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('dreadnode_task_envs', NEW.id);
	RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER sandboxes_notify_insert AFTER INSERT ON sandboxes
	FOR EACH ROW EXECUTE FUNCTION dreadnode_notify_record();
CREATE TRIGGER sandboxes_notify_update AFTER UPDATE ON sandboxes
	FOR EACH ROW WHEN (OLD.version IS DISTINCT FROM NEW.version) EXECUTE FUNCTION dreadnode_notify_record();
CREATE TRIGGER task_environments_notify AFTER INSERT OR UPDATE ON task_environments
	FOR EACH ROW EXECUTE FUNCTION dreadnode_notify_task_env();

-- +goose Down
DROP TRIGGER task_environments_notify ON task_environments;
DROP TRIGGER sandboxes_notify_update ON sandboxes;
DROP TRIGGER sandboxes_notify_insert ON sandboxes;
DROP FUNCTION dreadnode_notify_task_env();
DROP FUNCTION dreadnode_notify_record();
