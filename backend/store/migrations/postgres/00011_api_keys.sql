-- The PostgreSQL twin of sqlite/00011_api_keys.sql (keys as resources),
-- plus the change notification that makes a revocation reach every
-- replica's key cache at once: an update that revokes a key, or changes
-- its expiry or scope, notifies 'dreadnode_api_keys' with the key's hash
-- (store/listen.go drops it from the cache). Updates of last_used_at alone
-- notify nothing, so use does not flush the other replicas' caches.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN id TEXT;
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
ALTER TABLE api_keys ADD COLUMN revoked_at BIGINT;
UPDATE api_keys SET id = 'key_' || substr(hash, 1, 20), name = 'bootstrap';
CREATE UNIQUE INDEX api_keys_id ON api_keys (id);
CREATE INDEX api_keys_org ON api_keys (org_id, created_at);

-- +goose StatementBegin
CREATE FUNCTION dreadnode_notify_api_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('dreadnode_api_keys', NEW.hash);
	RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER api_keys_notify AFTER UPDATE ON api_keys
	FOR EACH ROW WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at
		OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
		OR OLD.scope IS DISTINCT FROM NEW.scope)
	EXECUTE FUNCTION dreadnode_notify_api_key();

-- +goose Down
DROP TRIGGER api_keys_notify ON api_keys;
DROP FUNCTION dreadnode_notify_api_key();
DROP INDEX api_keys_org;
DROP INDEX api_keys_id;
ALTER TABLE api_keys DROP COLUMN revoked_at;
ALTER TABLE api_keys DROP COLUMN expires_at;
ALTER TABLE api_keys DROP COLUMN last_used_at;
ALTER TABLE api_keys DROP COLUMN scope;
ALTER TABLE api_keys DROP COLUMN prefix;
ALTER TABLE api_keys DROP COLUMN name;
ALTER TABLE api_keys DROP COLUMN id;
