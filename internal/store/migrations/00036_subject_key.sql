-- +goose Up
-- Subject keys (package codec): one random key per team and recipient
-- address, sealed with the master key (associated data: the row's id, so
-- the master-key rotation re-seals them like every sealed column), under
-- which the Temporal payloads that carry the address are encrypted.
-- subject is an HMAC of the normalised address under a key derived from
-- the master key (pinned across rotations), so the table never holds the
-- address; deleting a row (an erasure) makes every payload encrypted under
-- that key unreadable (crypto-shredding).
CREATE TABLE subject_key (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    subject    bytea NOT NULL,
    sealed_key bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, subject)
);

-- +goose Down
DROP TABLE subject_key;
