-- API keys become resources an org manages (shared/API.md §11): each has an
-- id, a name, the first characters of its secret (so people can tell keys
-- apart; the secret itself is only ever stored as its hash), a scope
-- ("full" or "read"), and optional expiry and revocation times. Times are
-- Unix nanoseconds, NULL when unset. Existing keys (the bootstrap ones)
-- become full keys named "bootstrap" with an id derived from their hash.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN id TEXT;
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;
UPDATE api_keys SET id = 'key_' || substr(hash, 1, 20), name = 'bootstrap';
CREATE UNIQUE INDEX api_keys_id ON api_keys (id);
CREATE INDEX api_keys_org ON api_keys (org_id, created_at);

-- +goose Down
DROP INDEX api_keys_org;
DROP INDEX api_keys_id;
ALTER TABLE api_keys DROP COLUMN revoked_at;
ALTER TABLE api_keys DROP COLUMN expires_at;
ALTER TABLE api_keys DROP COLUMN last_used_at;
ALTER TABLE api_keys DROP COLUMN scope;
ALTER TABLE api_keys DROP COLUMN prefix;
ALTER TABLE api_keys DROP COLUMN name;
ALTER TABLE api_keys DROP COLUMN id;
