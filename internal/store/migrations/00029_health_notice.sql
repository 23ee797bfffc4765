-- +goose Up
-- Account health notices: one row per crossing found by an evaluation,
-- inserted in the transaction that stores the new team_health state, so a
-- crossing is never recorded without its notice. The health monitor sends
-- each pending row (sent_at NULL) to the team's owners with an idempotency
-- key derived from its id, then sets sent_at and the id of the email
-- (NULL when the team had no owners or no system sender is configured). A
-- crash between the send and that update re-sends with the same key, which
-- replays the first email instead of accepting a second one.
-- email_id has no foreign key: the email may belong to the operator's
-- team (a verified POSTHASTE_SYSTEM_FROM domain) and is purged with the
-- email log while the notice stays. Rows go with their team by cascade and
-- are purged 30 days after they were created, sent or not: by then the
-- window they describe has passed (retention.go).
CREATE TABLE health_notice (
    id             uuid PRIMARY KEY,
    team_id        uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    metric         text NOT NULL CHECK (metric IN ('bounce', 'complaint')),
    rate           double precision NOT NULL,
    threshold      double precision NOT NULL,
    paused         boolean NOT NULL,
    window_seconds bigint NOT NULL CHECK (window_seconds > 0),
    delivered      bigint NOT NULL,
    bounced        bigint NOT NULL,
    complained     bigint NOT NULL,
    created_at     timestamptz NOT NULL,
    sent_at        timestamptz,
    email_id       uuid,
    CHECK (email_id IS NULL OR sent_at IS NOT NULL)
);
-- The monitor reads the pending notices, oldest first, at every interval.
CREATE INDEX health_notice_pending ON health_notice (created_at) WHERE sent_at IS NULL;
-- Deleting a team deletes its notices by cascade.
CREATE INDEX health_notice_team ON health_notice (team_id);

-- +goose Down
DROP TABLE health_notice;
