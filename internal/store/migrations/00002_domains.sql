-- +goose Up
CREATE TABLE domain (
    id               uuid PRIMARY KEY,
    team_id          uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name = lower(name)),
    region           text NOT NULL CHECK (region IN ('us-east-1', 'eu-west-1', 'sa-east-1', 'ap-northeast-1')),
    status           text NOT NULL CHECK (status IN ('not_started', 'pending', 'verified',
                         'partially_verified', 'failed', 'temporary_failure')),
    return_path      text NOT NULL,
    open_tracking    boolean NOT NULL DEFAULT false,
    click_tracking   boolean NOT NULL DEFAULT false,
    tls              text NOT NULL CHECK (tls IN ('opportunistic', 'enforced')),
    dkim_selector    text NOT NULL,
    dkim_public_key  text NOT NULL,  -- base64 DER SubjectPublicKeyInfo, as published in p=
    dkim_private_key bytea NOT NULL, -- PKCS #8, sealed with the master key
    -- Status of each record by its key (dkim, spf_mx, spf_txt, dmarc).
    record_status    jsonb NOT NULL DEFAULT '{}',
    verified_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- A deleted domain sends nothing new; emails accepted before still
    -- need its key, so the row stays.
    deleted_at       timestamptz
);
CREATE UNIQUE INDEX domain_team_name ON domain (team_id, name) WHERE deleted_at IS NULL;
CREATE INDEX domain_team_id ON domain (team_id, id DESC) WHERE deleted_at IS NULL;

-- The verified domain an email was accepted under; NULL for the sandbox.
ALTER TABLE email ADD COLUMN domain_id uuid REFERENCES domain (id);

CREATE TABLE suppression (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    email      text NOT NULL CHECK (email = lower(email)),
    reason     text NOT NULL CHECK (reason IN ('bounce', 'complaint', 'manual')),
    email_id   uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, email)
);
CREATE INDEX suppression_team_id ON suppression (team_id, id DESC);

-- +goose Down
DROP TABLE suppression;
ALTER TABLE email DROP COLUMN domain_id;
DROP TABLE domain;
