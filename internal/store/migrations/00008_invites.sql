-- +goose Up
-- A dashboard user's optional display name, set when joining by invitation.
ALTER TABLE app_user ADD COLUMN name text NOT NULL DEFAULT '';

-- Invitations to join a team, sent by email. Only a hash of the token in
-- the link is stored. A team has one invitation per address: inviting
-- again replaces its token and expiry. Accepting or revoking deletes it.
CREATE TABLE invitation (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    email      text NOT NULL CHECK (email = lower(email)),
    role       text NOT NULL CHECK (role IN ('owner', 'member')),
    token_hash bytea NOT NULL UNIQUE,
    invited_by uuid REFERENCES app_user (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    UNIQUE (team_id, email)
);

-- Password-reset links, at most one live per user (a new request replaces
-- the old token). Only a hash of the token is stored; using it deletes it.
CREATE TABLE password_reset (
    user_id    uuid PRIMARY KEY REFERENCES app_user (id) ON DELETE CASCADE,
    token_hash bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- Posthaste's own team, which has no members: invitation and password-reset
-- emails from the sandbox sender are sent as this team, so the links they
-- carry appear in no team's email log.
INSERT INTO team (id, name, plan) VALUES ('00000000-0000-0000-0000-000000000001', 'Posthaste system mail', '2.5m');

-- +goose Down
DELETE FROM team WHERE id = '00000000-0000-0000-0000-000000000001';
DROP TABLE password_reset;
DROP TABLE invitation;
ALTER TABLE app_user DROP COLUMN name;
