-- +goose Up
-- The audit log (package audit): one hash chain for the installation,
-- ordered by seq. Entries are only ever appended (under a lock on the
-- chain head) and deleted by the retention sweep in whole old prefixes;
-- team_id has no foreign key so that no cascade can cut the chain.
CREATE TABLE audit_entry (
    seq         bigint PRIMARY KEY,
    id          uuid NOT NULL UNIQUE,
    team_id     uuid,
    actor_type  text NOT NULL CHECK (actor_type IN ('user', 'api_key', 'admin', 'system', 'unknown')),
    actor_id    uuid,
    action      text NOT NULL,
    target_type text NOT NULL,
    target_id   text NOT NULL,
    client_addr text NOT NULL,
    user_agent  text NOT NULL,
    outcome     text NOT NULL CHECK (outcome IN ('success', 'failure')),
    -- Kept as the exact text that was hashed (jsonb would reorder it).
    detail      text NOT NULL,
    created_at  timestamptz NOT NULL,
    prev_hash   bytea NOT NULL,
    hash        bytea NOT NULL
);
CREATE INDEX audit_entry_team_id ON audit_entry (team_id, id);
CREATE INDEX audit_entry_created_at ON audit_entry (created_at);

-- The chain head, one row: the last entry appended (last_seq, last_hash)
-- and the anchor the stored chain starts from (the last entry the
-- retention sweep deleted; seq 0 and 32 zero bytes before any).
CREATE TABLE audit_chain (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    last_seq    bigint NOT NULL,
    last_hash   bytea NOT NULL,
    anchor_seq  bigint NOT NULL,
    anchor_hash bytea NOT NULL
);
INSERT INTO audit_chain (last_seq, last_hash, anchor_seq, anchor_hash)
VALUES (0, '\x0000000000000000000000000000000000000000000000000000000000000000',
        0, '\x0000000000000000000000000000000000000000000000000000000000000000');

-- +goose Down
DROP TABLE audit_chain;
DROP TABLE audit_entry;
