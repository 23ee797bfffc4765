-- +goose Up
CREATE TABLE team (
    id         uuid PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE app_user (
    id            uuid PRIMARY KEY,
    email         text NOT NULL UNIQUE CHECK (email = lower(email)),
    password_hash text,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE membership (
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX membership_user ON membership (user_id);

CREATE TABLE api_key (
    id           uuid PRIMARY KEY,
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name         text NOT NULL,
    prefix       text NOT NULL,
    hash         bytea NOT NULL UNIQUE,
    permission   text NOT NULL CHECK (permission IN ('full_access', 'sending_access')),
    domain_id    uuid,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_key_team ON api_key (team_id, id);

CREATE TABLE email (
    id            uuid PRIMARY KEY,
    team_id       uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    from_addr     text NOT NULL,
    from_domain   text NOT NULL,
    to_addrs      text[] NOT NULL,
    cc_addrs      text[] NOT NULL,
    bcc_addrs     text[] NOT NULL,
    reply_to      text[] NOT NULL,
    subject       text NOT NULL,
    html          text,
    text_body     text,
    generate_text boolean NOT NULL DEFAULT false,
    headers       jsonb NOT NULL DEFAULT '[]',
    tags          jsonb NOT NULL DEFAULT '[]',
    scheduled_at  timestamptz,
    last_event    text NOT NULL CHECK (last_event IN ('scheduled', 'queued', 'sent', 'delivered',
                      'delivery_delayed', 'bounced', 'complained', 'opened', 'clicked', 'failed',
                      'canceled', 'suppressed')),
    message_id    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- Email ids are UUIDv7, so id order is creation order.
CREATE INDEX email_team_id ON email (team_id, id DESC);

CREATE TABLE email_recipient (
    email_id   uuid NOT NULL REFERENCES email (id) ON DELETE CASCADE,
    address    text NOT NULL,
    position   int NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('to', 'cc', 'bcc')),
    domain     text NOT NULL,
    status     text NOT NULL CHECK (status IN ('scheduled', 'queued', 'sent', 'delivered',
                   'delivery_delayed', 'bounced', 'complained', 'failed', 'canceled', 'suppressed')),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (email_id, address)
);

CREATE TABLE email_event (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email_id   uuid NOT NULL REFERENCES email (id) ON DELETE CASCADE,
    type       text NOT NULL,
    recipient  text,
    detail     jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_event_email ON email_event (email_id, id);
-- Workflow steps may run twice (a retried local activity); an event of a
-- kind that happens once per recipient is then recorded once.
CREATE UNIQUE INDEX email_event_once ON email_event (email_id, type, coalesce(recipient, ''))
    WHERE type NOT IN ('opened', 'clicked');

CREATE TABLE attachment (
    email_id     uuid NOT NULL REFERENCES email (id) ON DELETE CASCADE,
    position     int NOT NULL,
    filename     text NOT NULL,
    content_type text NOT NULL,
    content_id   text NOT NULL DEFAULT '',
    content      bytea NOT NULL,
    PRIMARY KEY (email_id, position)
);

-- The built MIME message, written once by the BuildMessage step.
CREATE TABLE email_message (
    email_id   uuid PRIMARY KEY REFERENCES email (id) ON DELETE CASCADE,
    data       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Accepted work whose workflow has not been started yet (transactional outbox).
CREATE TABLE outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('send_email')),
    team_id      uuid NOT NULL,
    ref          uuid NOT NULL,
    scheduled_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE outbox;
DROP TABLE email_message;
DROP TABLE attachment;
DROP TABLE email_event;
DROP TABLE email_recipient;
DROP TABLE email;
DROP TABLE api_key;
DROP TABLE membership;
DROP TABLE app_user;
DROP TABLE team;
