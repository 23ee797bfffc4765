-- +goose Up
-- A message the inbound MX (internal/inbound) accepted, one row per team
-- its recipients belong to: a message whose recipients span teams is
-- stored once for each, with only that team's recipients, so no team ever
-- sees another's. message_id is the listener's id of the whole message
-- (in its Received header). recipients: [{"address", "kind", "domain_id",
-- "email_id"}], the routes the listener found at RCPT. The row, and an
-- outbox entry that starts its ProcessInbound workflow, are committed
-- before the 250 reply to DATA. Rows are deleted 30 days after they
-- arrived (PurgeExpired).
CREATE TABLE inbound_message (
    id           uuid PRIMARY KEY,
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    message_id   uuid NOT NULL,
    kinds        text[] NOT NULL,
    mail_from    text NOT NULL,
    recipients   jsonb NOT NULL,
    client_ip    inet,
    helo         text NOT NULL DEFAULT '',
    tls          boolean NOT NULL DEFAULT false,
    auth         jsonb NOT NULL DEFAULT '{}',
    auth_header  text NOT NULL DEFAULT '',
    raw          bytea NOT NULL,
    size         integer NOT NULL,
    received_at  timestamptz NOT NULL,
    status       text NOT NULL DEFAULT 'accepted' CHECK (status IN ('accepted', 'processed')),
    -- result is what processing found: the reports.Kind of the message.
    result       text,
    processed_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (message_id, team_id)
);
CREATE INDEX inbound_message_team ON inbound_message (team_id, id DESC);
CREATE INDEX inbound_message_created ON inbound_message (created_at);

-- Return paths are signed (bounces+<email id>-<signature>@...) from this
-- migration on. An unsigned return path is still routed for the emails
-- created before signed_since, which were sent with one; for any later
-- email only a valid signature is.
CREATE TABLE return_path_signing (
    only_row     boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    signed_since timestamptz NOT NULL DEFAULT now()
);
INSERT INTO return_path_signing DEFAULT VALUES;

-- A bounce whose return path was rewritten is matched by the original
-- Message-ID, within the team.
CREATE INDEX email_message_id ON email (team_id, message_id) WHERE message_id IS NOT NULL;

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import', 'inbound'));

-- +goose Down
DELETE FROM outbox WHERE kind = 'inbound';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import'));
DROP INDEX email_message_id;
DROP TABLE return_path_signing;
DROP TABLE inbound_message;
