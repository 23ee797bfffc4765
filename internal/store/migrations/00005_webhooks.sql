-- +goose Up
-- A team's webhook endpoint. The signing secret is sealed with the master
-- key (bound to the webhook id); after a rotation the previous secret keeps
-- signing until previous_secret_until.
CREATE TABLE webhook (
    id                    uuid PRIMARY KEY,
    team_id               uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    endpoint              text NOT NULL,
    events                text[] NOT NULL,
    status                text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    secret                bytea NOT NULL,
    previous_secret       bytea,
    previous_secret_until timestamptz,
    -- Set by the first failed attempt after a success; an endpoint failing
    -- for long enough is disabled.
    failing_since         timestamptz,
    disabled_reason       text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_team_id ON webhook (team_id, id DESC);
CREATE INDEX webhook_team_enabled ON webhook (team_id) WHERE status = 'enabled';

-- One event for one endpoint. Messages with the same order_key (the email
-- or domain they are about) are delivered in seq order.
CREATE TABLE webhook_message (
    seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id              uuid PRIMARY KEY,
    team_id         uuid NOT NULL,
    webhook_id      uuid NOT NULL REFERENCES webhook (id) ON DELETE CASCADE,
    type            text NOT NULL,
    order_key       text NOT NULL,
    payload         jsonb NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'attempting', 'success', 'failed')),
    attempts        int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_message_due ON webhook_message (webhook_id, seq) WHERE status IN ('pending', 'attempting');
CREATE INDEX webhook_message_list ON webhook_message (webhook_id, seq DESC);

CREATE TABLE webhook_attempt (
    id              uuid PRIMARY KEY,
    message_id      uuid NOT NULL REFERENCES webhook_message (id) ON DELETE CASCADE,
    team_id         uuid NOT NULL,
    attempted_at    timestamptz NOT NULL,
    response_status int,
    response_body   text NOT NULL DEFAULT '',
    duration_ms     int NOT NULL,
    error           text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_attempt_message ON webhook_attempt (message_id, attempted_at);

-- New messages wake their endpoint's DeliverWebhook workflow through the outbox.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('send_email', 'send_batch', 'webhook'));
CREATE INDEX outbox_webhook ON outbox (ref) WHERE kind = 'webhook';

-- +goose Down
DROP INDEX outbox_webhook;
DELETE FROM outbox WHERE kind = 'webhook';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('send_email', 'send_batch'));
DROP TABLE webhook_attempt;
DROP TABLE webhook_message;
DROP TABLE webhook;
