-- +goose Up
-- When a user's email address was proven to be theirs: an emailed
-- invitation or password-reset link was used, an identity provider vouched
-- for it (a verified email), or the operator created the user. NULL means
-- unproven: the password was set through an invitation link shown to a team
-- owner, who may not control the address. OAuth sign-in never enters an
-- account whose address is unproven.
ALTER TABLE app_user ADD COLUMN email_verified_at timestamptz;
-- Users without a password could only come from an OAuth sign-up, whose
-- provider had verified the address. Users with one stay unproven: nothing
-- tells an emailed invitation from a shown one before this migration. They
-- still sign in with their password, and prove the address by using an
-- emailed reset link or by a provider sign-in while signed in.
UPDATE app_user SET email_verified_at = created_at WHERE coalesce(password_hash, '') = '';

-- When the invitation's link was emailed to the invited address (by the
-- system mailer). NULL: the link was shown to the inviting owner, so using
-- it proves nothing about the address. Inviting again resets it.
ALTER TABLE invitation ADD COLUMN emailed_at timestamptz;

-- Invitation and password-reset emails the dashboard sent (or was asked to
-- send) through the system mailer, counted per team and per address over
-- the last hour so that neither can drain the system sender's quota. Rows
-- older than a day are swept by the retention workflow.
CREATE TABLE system_mail (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('invitation', 'password_reset')),
    team_id    uuid REFERENCES team (id) ON DELETE CASCADE,
    email      text NOT NULL CHECK (email = lower(email)),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX system_mail_email ON system_mail (email, created_at);
CREATE INDEX system_mail_team ON system_mail (team_id, created_at) WHERE team_id IS NOT NULL;
CREATE INDEX system_mail_created ON system_mail (created_at);

-- +goose Down
DROP TABLE system_mail;
ALTER TABLE invitation DROP COLUMN emailed_at;
ALTER TABLE app_user DROP COLUMN email_verified_at;
