-- +goose Up
-- A team's contacts. The address is unique per team, lower-cased the way
-- the suppression list stores addresses. properties holds the values of the
-- team's contact_property definitions, keyed by property key.
CREATE TABLE contact (
    id           uuid PRIMARY KEY,
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    email        text NOT NULL CHECK (email = lower(email)),
    first_name   text NOT NULL DEFAULT '',
    last_name    text NOT NULL DEFAULT '',
    unsubscribed boolean NOT NULL DEFAULT false,
    properties   jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, email),
    UNIQUE (team_id, id)
);

-- Typed custom properties: the keys a contact's properties may hold.
CREATE TABLE contact_property (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    key        text NOT NULL,
    type       text NOT NULL CHECK (type IN ('string', 'number')),
    fallback   jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, key)
);

CREATE TABLE segment (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, id)
);

-- The composite references keep memberships inside one team.
CREATE TABLE contact_segment (
    team_id    uuid NOT NULL,
    contact_id uuid NOT NULL,
    segment_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (segment_id, contact_id),
    FOREIGN KEY (team_id, contact_id) REFERENCES contact (team_id, id) ON DELETE CASCADE,
    FOREIGN KEY (team_id, segment_id) REFERENCES segment (team_id, id) ON DELETE CASCADE
);
CREATE INDEX contact_segment_contact ON contact_segment (contact_id);

CREATE TABLE topic (
    id                   uuid PRIMARY KEY,
    team_id              uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name                 text NOT NULL,
    description          text NOT NULL DEFAULT '',
    default_subscription text NOT NULL CHECK (default_subscription IN ('opt_in', 'opt_out')),
    visibility           text NOT NULL DEFAULT 'private' CHECK (visibility IN ('public', 'private')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, id)
);

-- A contact's explicit choice for a topic; without a row the topic's
-- default_subscription applies.
CREATE TABLE contact_topic (
    team_id      uuid NOT NULL,
    contact_id   uuid NOT NULL,
    topic_id     uuid NOT NULL,
    subscription text NOT NULL CHECK (subscription IN ('opt_in', 'opt_out')),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (contact_id, topic_id),
    FOREIGN KEY (team_id, contact_id) REFERENCES contact (team_id, id) ON DELETE CASCADE,
    FOREIGN KEY (team_id, topic_id) REFERENCES topic (team_id, id) ON DELETE CASCADE
);
CREATE INDEX contact_topic_topic ON contact_topic (topic_id);

-- The topic an email was sent with (`topic_id`): when it is prepared,
-- recipients whose subscription excludes them are suppressed. Deleting the
-- topic ends that check for emails not yet prepared.
ALTER TABLE email ADD COLUMN topic_id uuid REFERENCES topic (id) ON DELETE SET NULL;
CREATE INDEX email_topic ON email (topic_id) WHERE topic_id IS NOT NULL;

-- +goose Down
ALTER TABLE email DROP COLUMN topic_id;
DROP TABLE contact_topic;
DROP TABLE topic;
DROP TABLE contact_segment;
DROP TABLE segment;
DROP TABLE contact_property;
DROP TABLE contact;
