-- +goose Up
-- Receiving (issue 16 point 4): a domain with receiving enabled accepts
-- mail for any address at it on the inbound MX, once the domain is
-- verified. Resend's capabilities.receiving.
ALTER TABLE domain ADD COLUMN receiving text NOT NULL DEFAULT 'disabled'
    CHECK (receiving IN ('enabled', 'disabled'));
CREATE INDEX domain_receiving ON domain (name) WHERE receiving = 'enabled' AND deleted_at IS NULL;

-- An email received for a domain: the parsed form of an inbound_message
-- (which keeps the raw message), one row per message and receiving
-- domain, inserted once (a retried workflow step inserts nothing). It is
-- deleted with its inbound_message, 30 days after it arrived
-- (PurgeExpired), like sent mail.
CREATE TABLE received_email (
    id           uuid PRIMARY KEY,
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    domain_id    uuid NOT NULL REFERENCES domain (id) ON DELETE CASCADE,
    inbound_id   uuid NOT NULL REFERENCES inbound_message (id) ON DELETE CASCADE,
    from_addr    text NOT NULL,
    to_addrs     text[] NOT NULL,
    cc           text[] NOT NULL,
    bcc          text[] NOT NULL,
    reply_to     text[] NOT NULL,
    -- received_for is the envelope recipients (RCPT TO) at this domain.
    received_for text[] NOT NULL,
    subject      text NOT NULL,
    message_id   text NOT NULL,
    text_body    text,
    html_body    text,
    -- headers: the message's header fields as an object, one value per
    -- name (repeated fields joined as Resend does not say otherwise: the
    -- first one wins).
    headers      jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    UNIQUE (inbound_id, domain_id)
);
CREATE INDEX received_email_team ON received_email (team_id, id DESC);

CREATE TABLE received_attachment (
    id                  uuid PRIMARY KEY,
    received_email_id   uuid NOT NULL REFERENCES received_email (id) ON DELETE CASCADE,
    team_id             uuid NOT NULL,
    position            integer NOT NULL,
    filename            text,
    content_type        text NOT NULL,
    content_disposition text,
    content_id          text,
    size                integer NOT NULL,
    content             bytea NOT NULL,
    UNIQUE (received_email_id, position)
);

-- +goose Down
DROP TABLE received_attachment;
DROP TABLE received_email;
DROP INDEX domain_receiving;
ALTER TABLE domain DROP COLUMN receiving;
