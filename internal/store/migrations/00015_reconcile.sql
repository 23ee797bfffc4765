-- +goose Up
-- The reconciler restarts the workflow of an email that was never sent
-- and whose workflow is gone; restarts counts those restarts (the n of
-- the restart's workflow ID email/<id>/retry-<n>) and bounds them.
ALTER TABLE email ADD COLUMN restarts smallint NOT NULL DEFAULT 0;

-- The emails with a recipient that has no outcome yet, by the time they
-- were due to leave: the reconciler reads the oldest of them. An email
-- enters the index when it is accepted and leaves it when its last
-- recipient reaches a final state, so the index holds the mail in flight,
-- not the 30 days the retention keeps.
CREATE INDEX email_open ON email ((greatest(created_at, scheduled_at)), id)
    WHERE rcpt_status && ARRAY['scheduled', 'queued', 'sent', 'delivery_delayed'];

-- +goose Down
DROP INDEX email_open;
ALTER TABLE email DROP COLUMN restarts;
