-- +goose Up
-- Dashboard sessions remember where they were started and when they were
-- last used: the account page lists them, and an idle timeout ends one
-- unused for too long. last_used_at is refreshed at most once a minute.
ALTER TABLE dashboard_session
    ADD COLUMN client_addr  text NOT NULL DEFAULT '',
    ADD COLUMN user_agent   text NOT NULL DEFAULT '',
    ADD COLUMN last_used_at timestamptz NOT NULL DEFAULT now();

-- An API key may be limited to client address ranges (a Posthaste
-- extension to Resend's API); empty: any address.
ALTER TABLE api_key ADD COLUMN allowed_ips cidr[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE api_key DROP COLUMN allowed_ips;
ALTER TABLE dashboard_session
    DROP COLUMN client_addr,
    DROP COLUMN user_agent,
    DROP COLUMN last_used_at;
