-- +goose Up
-- Events are only ever read by email (an email's history in id order, the
-- retention sweep, the dashboard's counts), never by id alone. A primary
-- key on (email_id, id) serves all of them, so email_event_email is one
-- index too many to write for every event: a batch of 100 emails writes
-- 100 first events.
ALTER TABLE email_event DROP CONSTRAINT email_event_pkey, ADD PRIMARY KEY (email_id, id);
DROP INDEX email_event_email;

-- +goose Down
CREATE INDEX email_event_email ON email_event (email_id, id);
ALTER TABLE email_event DROP CONSTRAINT email_event_pkey, ADD PRIMARY KEY (id);
