-- +goose Up
-- Who created each API key (issue 33): the dashboard user who made it, or
-- for a key made through the API the user behind the calling key. A key
-- reaches the API's owner-only routes only while its creator owns the
-- team, and removing a member revokes the keys they created.
ALTER TABLE api_key ADD COLUMN created_by uuid REFERENCES app_user (id) ON DELETE SET NULL;
CREATE INDEX api_key_created_by ON api_key (team_id, created_by) WHERE revoked_at IS NULL;

-- Backfill from the audit log. 1: keys a dashboard user created.
UPDATE api_key k SET created_by = e.actor_id
FROM audit_entry e JOIN app_user u ON u.id = e.actor_id
WHERE e.action = 'api_key.create' AND e.target_type = 'api_key' AND e.target_id = k.id::text
  AND e.outcome = 'success' AND e.actor_type = 'user' AND e.team_id = k.team_id;

-- 2: keys no user or key is recorded creating (the bootstrap key of `dev`,
-- keys of `posthaste admin` or `create-team`, entries the retention sweep
-- removed) belong to the team's earliest owner.
UPDATE api_key k SET created_by = (
    SELECT m.user_id FROM membership m WHERE m.team_id = k.team_id AND m.role = 'owner'
    ORDER BY m.created_at, m.user_id LIMIT 1)
WHERE k.created_by IS NULL AND NOT EXISTS (
    SELECT 1 FROM audit_entry e
    WHERE e.action = 'api_key.create' AND e.target_type = 'api_key' AND e.target_id = k.id::text
      AND e.outcome = 'success' AND e.actor_type IN ('user', 'api_key'));

-- 3: a key created with another key has that key's creator, however long
-- the chain.
-- +goose StatementBegin
DO $$
BEGIN
    LOOP
        UPDATE api_key k SET created_by = p.created_by
        FROM audit_entry e JOIN api_key p ON p.id = e.actor_id
        WHERE e.action = 'api_key.create' AND e.target_type = 'api_key' AND e.target_id = k.id::text
          AND e.outcome = 'success' AND e.actor_type = 'api_key' AND p.team_id = k.team_id
          AND k.created_by IS NULL AND p.created_by IS NOT NULL;
        EXIT WHEN NOT FOUND;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- 4: what is left (a chain that leads nowhere) belongs to the earliest owner.
UPDATE api_key k SET created_by = (
    SELECT m.user_id FROM membership m WHERE m.team_id = k.team_id AND m.role = 'owner'
    ORDER BY m.created_at, m.user_id LIMIT 1)
WHERE k.created_by IS NULL;

-- Keys of users who already left their team stop working, as they would
-- have had the member been removed after this migration. Going down does
-- not bring them back.
UPDATE api_key k SET revoked_at = now()
WHERE k.revoked_at IS NULL AND k.created_by IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM membership m WHERE m.team_id = k.team_id AND m.user_id = k.created_by);

-- +goose Down
DROP INDEX api_key_created_by;
ALTER TABLE api_key DROP COLUMN created_by;
