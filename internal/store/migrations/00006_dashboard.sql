-- +goose Up
-- Dashboard sessions. Only a hash of the cookie value is stored.
CREATE TABLE dashboard_session (
    id_hash      bytea PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX dashboard_session_user ON dashboard_session (user_id);

-- Metrics read events by team and time.
CREATE INDEX email_team_created ON email (team_id, created_at);

-- +goose Down
DROP INDEX email_team_created;
DROP TABLE dashboard_session;
