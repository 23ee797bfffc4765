-- +goose Up
-- Broadcasts: one email to every subscribed contact of a segment. The
-- content is stored as written (placeholders in), and each contact's
-- email is rendered from it when the Broadcast workflow hands its chunk
-- to the send path.
CREATE TABLE broadcast (
    id            uuid PRIMARY KEY,
    team_id       uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name          text NOT NULL DEFAULT '',
    -- A deleted segment or topic leaves the broadcast without one; a
    -- draft can be given another, a broadcast under way keeps sending to
    -- whom it reached (its chunks name their contacts).
    segment_id    uuid REFERENCES segment (id) ON DELETE SET NULL,
    topic_id      uuid REFERENCES topic (id) ON DELETE SET NULL,
    from_addr     text NOT NULL DEFAULT '',
    subject       text NOT NULL DEFAULT '',
    reply_to      text[] NOT NULL DEFAULT '{}',
    preview_text  text NOT NULL DEFAULT '',
    html          text,
    text_body     text,
    -- The component document (internal/components) the broadcast was
    -- written as in the editor; html and text_body are then its rendering.
    components    jsonb,
    status        text NOT NULL DEFAULT 'draft'
                  CHECK (status IN ('draft', 'scheduled', 'queued', 'sending', 'paused', 'sent', 'canceled')),
    -- Why a paused broadcast waits (the monthly quota), or why it stopped.
    status_reason text,
    scheduled_at  timestamptz,
    sent_at       timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, id)
);
CREATE INDEX broadcast_segment ON broadcast (segment_id) WHERE segment_id IS NOT NULL;
CREATE INDEX broadcast_topic ON broadcast (topic_id) WHERE topic_id IS NOT NULL;

-- The emails of a broadcast name it and their contact. Each contact gets a
-- broadcast at most once: a chunk handed to the send path twice (a crash
-- between its commit and the workflow learning of it, a resume days
-- later) inserts nothing the second time.
ALTER TABLE email ADD COLUMN broadcast_id uuid, ADD COLUMN contact_id uuid;
CREATE UNIQUE INDEX email_broadcast_contact ON email (broadcast_id, contact_id) WHERE broadcast_id IS NOT NULL;

-- One row per chunk a broadcast handed to the send path, written in the
-- transaction that inserts the chunk's emails: running a chunk again
-- returns what it did the first time. last_contact is the cursor through
-- the segment (contacts in id order) after the chunk.
CREATE TABLE broadcast_chunk (
    broadcast_id uuid NOT NULL REFERENCES broadcast (id) ON DELETE CASCADE,
    seq          int NOT NULL CHECK (seq >= 0),
    batch_id     uuid,
    last_contact uuid,
    emails       int NOT NULL,
    failed       int NOT NULL,
    suppressed   int NOT NULL,
    done         boolean NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (broadcast_id, seq)
);

-- Contacts that unsubscribed through a link of a broadcast's email.
CREATE TABLE broadcast_unsubscribe (
    broadcast_id uuid NOT NULL REFERENCES broadcast (id) ON DELETE CASCADE,
    email_id     uuid NOT NULL,
    email        text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (broadcast_id, email)
);

-- The pace of a team's broadcasts (POSTHASTE_BROADCAST_RATE): the time
-- from which its next emails may be handed to the send path. Shared by
-- every broadcast of the team and every worker process.
CREATE TABLE broadcast_pace (
    team_id uuid PRIMARY KEY REFERENCES team (id) ON DELETE CASCADE,
    next_at timestamptz NOT NULL
);

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import', 'inbound', 'broadcast'));

-- +goose Down
DELETE FROM outbox WHERE kind = 'broadcast';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import', 'inbound'));
DROP TABLE broadcast_pace;
DROP TABLE broadcast_unsubscribe;
DROP TABLE broadcast_chunk;
DROP INDEX email_broadcast_contact;
ALTER TABLE email DROP COLUMN broadcast_id, DROP COLUMN contact_id;
DROP TABLE broadcast;
