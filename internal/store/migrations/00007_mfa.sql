-- +goose Up
-- TOTP multi-factor authentication (RFC 6238) for dashboard users. The
-- secret is sealed with the master key; it takes effect once confirmed.
ALTER TABLE app_user ADD COLUMN totp_secret bytea;
ALTER TABLE app_user ADD COLUMN totp_enabled_at timestamptz;

-- One-time recovery codes, stored hashed.
CREATE TABLE recovery_code (
    user_id   uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
    code_hash bytea NOT NULL,
    used_at   timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

ALTER TABLE team ADD COLUMN mfa_required boolean NOT NULL DEFAULT false;

-- A session that passed the password but not yet the second factor.
ALTER TABLE dashboard_session ADD COLUMN mfa_pending boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE dashboard_session DROP COLUMN mfa_pending;
ALTER TABLE team DROP COLUMN mfa_required;
DROP TABLE recovery_code;
ALTER TABLE app_user DROP COLUMN totp_enabled_at;
ALTER TABLE app_user DROP COLUMN totp_secret;
