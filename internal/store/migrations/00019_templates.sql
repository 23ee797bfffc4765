-- +goose Up
-- A team's email template (Resend's Templates API). `content` is the
-- version being edited (from, subject, reply_to, html, text, variables as
-- JSON); `published` is a copy of it taken by the last publish, and is
-- what sends render: editing a published template leaves the published
-- version sending until it is published again. A template never published
-- is a draft and cannot be sent.
CREATE TABLE template (
    id               uuid PRIMARY KEY,
    team_id          uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name             text NOT NULL,
    alias            text,
    content          jsonb NOT NULL,
    published        jsonb,
    published_at     timestamptz,
    has_unpublished  boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((published IS NULL) = (published_at IS NULL))
);
CREATE INDEX template_team_id ON template (team_id, id DESC);
CREATE UNIQUE INDEX template_team_alias ON template (team_id, alias) WHERE alias IS NOT NULL;

-- +goose Down
DROP TABLE template;
