-- +goose Up
-- Idempotency keys of POST /emails and POST /emails/batch (API.md,
-- Idempotency). A request claims its key (state in_flight, with a token
-- and a lease), and the transaction that accepts its emails completes the
-- claim with the response. A claim whose process died is taken over after
-- its lease; a record is replaced once it expires (24 h).
CREATE TABLE idempotency_key (
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    key          text NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
    endpoint     text NOT NULL,
    request_hash bytea NOT NULL,
    state        text NOT NULL CHECK (state IN ('in_flight', 'completed')),
    token        uuid NOT NULL,
    response     jsonb,
    locked_until timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (team_id, key)
);
CREATE INDEX idempotency_key_expires ON idempotency_key (expires_at);

-- What the workflow ID of an email is built from: the batch it belongs to
-- and the idempotency key of the request that accepted it.
ALTER TABLE email ADD COLUMN batch_id uuid, ADD COLUMN idempotency_key text;
CREATE INDEX email_batch ON email (batch_id, id) WHERE batch_id IS NOT NULL;

-- The outbox carries the idempotency key so the Starter can build the
-- keyed workflow ID; a batch is one entry (ref = batch id).
ALTER TABLE outbox ADD COLUMN idempotency_key text;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('send_email', 'send_batch'));
CREATE INDEX outbox_ref ON outbox (ref);

-- +goose Down
DROP INDEX outbox_ref;
DELETE FROM outbox WHERE kind = 'send_batch';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('send_email'));
ALTER TABLE outbox DROP COLUMN idempotency_key;
DROP INDEX email_batch;
ALTER TABLE email DROP COLUMN batch_id, DROP COLUMN idempotency_key;
DROP TABLE idempotency_key;
