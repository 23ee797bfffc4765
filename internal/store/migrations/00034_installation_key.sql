-- +goose Up
-- The installation's token keys (unsubscribe and tracked links, return
-- path signatures, mailto unsubscribe addresses, received downloads), one
-- per purpose, sealed with the master key (associated data: the purpose).
-- They were derived from the master key; stored, they outlive a rotation
-- of it, so links and return paths in mail already sent keep working.
-- Each is written once, by the first process to start, with the key it
-- derived from the master key of the time (INSERT ... ON CONFLICT DO
-- NOTHING), and only ever re-sealed afterwards.
CREATE TABLE installation_key (
    purpose    text PRIMARY KEY,
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE installation_key;
