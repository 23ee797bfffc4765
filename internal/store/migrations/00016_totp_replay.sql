-- +goose Up
-- The time step (RFC 6238 §4.2) of the last TOTP code accepted for the
-- user. A code is accepted once (RFC 6238 §5.2): a code of this step or an
-- earlier one is refused. A new secret starts without one.
ALTER TABLE app_user ADD COLUMN totp_last_step bigint;

-- +goose Down
ALTER TABLE app_user DROP COLUMN totp_last_step;
