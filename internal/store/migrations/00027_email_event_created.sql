-- +goose Up
-- GET /emails/metrics and the Metrics page count a team's events by the
-- time they happened, in a range (7 days by default). Without this index
-- the count reads every event of every email the team ever sent (events
-- such as opens may come weeks after the email); with it, the events of
-- the range, joined to their email by its primary key for the team.
CREATE INDEX email_event_created ON email_event (created_at);

-- +goose Down
DROP INDEX email_event_created;
