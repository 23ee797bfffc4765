-- +goose Up
-- What each team's receiving domains received, per UTC day: the inbound MX refuses a team's mail, with a 4xx, once today's
-- messages or the bytes of the last 30 days (what retention keeps of
-- inbound_message) reach its budget. A message is counted in the
-- transaction that stores it (Inbound.Accept): for a team with a budget
-- in slot 0, whose row lock serializes the team's accepts of a day so the
-- check is exact; for a team without one in slot 1 to 15 by backend, so
-- its accepts do not wait for each other. Usage is the sum of the slots.
-- Mail to return paths is not counted (a rate caps it instead). Rows
-- older than the window are purged (PurgeExpired).
CREATE TABLE inbound_usage (
    team_id  uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    day      date NOT NULL,
    slot     smallint NOT NULL DEFAULT 0 CHECK (slot BETWEEN 0 AND 15),
    messages integer NOT NULL DEFAULT 0,
    bytes    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, day, slot)
);

-- A team's own budget, instead of the POSTHASTE_INBOUND_DAILY_MESSAGES and
-- POSTHASTE_INBOUND_STORAGE_BYTES defaults; NULL: the default.
ALTER TABLE team ADD COLUMN inbound_daily_messages integer CHECK (inbound_daily_messages > 0),
    ADD COLUMN inbound_storage_bytes bigint CHECK (inbound_storage_bytes > 0);

-- +goose Down
ALTER TABLE team DROP COLUMN inbound_daily_messages, DROP COLUMN inbound_storage_bytes;
DROP TABLE inbound_usage;
