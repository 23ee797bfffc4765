-- +goose Up
-- What each team's receiving domains received, per UTC day (issue 33
-- point 1): the inbound MX refuses a team's mail, with a 4xx, once today's
-- messages or the bytes of the last 30 days (what retention keeps of
-- inbound_message) reach its budget. A row is counted in the transaction
-- that stores the message (Inbound.Accept), so its lock serializes one
-- team's accepts of a day. Mail to return paths is not counted (a rate
-- caps it instead). Rows older than the window are purged (PurgeExpired).
CREATE TABLE inbound_usage (
    team_id  uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    day      date NOT NULL,
    messages integer NOT NULL DEFAULT 0,
    bytes    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, day)
);

-- A team's own budget, instead of the POSTHASTE_INBOUND_DAILY_MESSAGES and
-- POSTHASTE_INBOUND_STORAGE_BYTES defaults; NULL: the default.
ALTER TABLE team ADD COLUMN inbound_daily_messages integer CHECK (inbound_daily_messages > 0),
    ADD COLUMN inbound_storage_bytes bigint CHECK (inbound_storage_bytes > 0);

-- +goose Down
ALTER TABLE team DROP COLUMN inbound_daily_messages, DROP COLUMN inbound_storage_bytes;
DROP TABLE inbound_usage;
