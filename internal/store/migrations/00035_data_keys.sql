-- +goose Up
-- Encryption at rest (issue 22 point 3): mail content is sealed with a
-- data key of its team (internal/datakey), itself sealed with the master
-- key under its own id, like DKIM keys. A team has one current key
-- (retired_at IS NULL); values name the key that sealed them, so retired
-- keys stay until no value needs them. Deleting a team deletes its keys,
-- which leaves any copy of its sealed content unreadable.
CREATE TABLE team_data_key (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    sealed_key bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    retired_at timestamptz
);
CREATE UNIQUE INDEX team_data_key_current ON team_data_key (team_id) WHERE retired_at IS NULL;

-- Sealed bodies go to new bytea columns and the text columns stay NULL;
-- rows written before this migration keep their plaintext in the text
-- columns and are read from there.
ALTER TABLE email ADD COLUMN html_sealed bytea, ADD COLUMN text_sealed bytea;
ALTER TABLE received_email ADD COLUMN html_sealed bytea, ADD COLUMN text_sealed bytea;
-- Byte columns are sealed in place; `sealed` says which rows are (false
-- for the rows written before this migration).
ALTER TABLE attachment ADD COLUMN sealed boolean NOT NULL DEFAULT false;
ALTER TABLE email_message ADD COLUMN sealed boolean NOT NULL DEFAULT false;
ALTER TABLE email_source ADD COLUMN sealed boolean NOT NULL DEFAULT false;
ALTER TABLE inbound_message ADD COLUMN sealed boolean NOT NULL DEFAULT false;
ALTER TABLE received_attachment ADD COLUMN sealed boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE received_attachment DROP COLUMN sealed;
ALTER TABLE inbound_message DROP COLUMN sealed;
ALTER TABLE email_source DROP COLUMN sealed;
ALTER TABLE email_message DROP COLUMN sealed;
ALTER TABLE attachment DROP COLUMN sealed;
ALTER TABLE received_email DROP COLUMN html_sealed, DROP COLUMN text_sealed;
ALTER TABLE email DROP COLUMN html_sealed, DROP COLUMN text_sealed;
DROP TABLE team_data_key;
