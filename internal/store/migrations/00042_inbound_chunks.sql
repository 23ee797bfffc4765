-- +goose Up
-- Inbound messages are stored in chunks (issue 33 point 1), each sealed
-- on its own, so that accepting one never builds it in memory, let alone
-- once per team: raw_chunks counts a row's chunks in
-- inbound_message_chunk, and raw stays empty. Rows written before keep
-- raw_chunks NULL and their message in raw, and are read from there.
ALTER TABLE inbound_message ADD COLUMN raw_chunks integer;
CREATE TABLE inbound_message_chunk (
    inbound_id uuid NOT NULL REFERENCES inbound_message (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (inbound_id, seq)
);

-- +goose Down
-- Unsealed chunks are joined back into raw. Sealed ones cannot be (each
-- chunk is sealed on its own, which the old format cannot read): those
-- messages are deleted, with what was received from them.
UPDATE inbound_message m SET raw = coalesce((SELECT string_agg(c.data, ''::bytea ORDER BY c.seq)
        FROM inbound_message_chunk c WHERE c.inbound_id = m.id), ''::bytea)
    WHERE raw_chunks IS NOT NULL AND NOT sealed;
DELETE FROM inbound_message WHERE raw_chunks IS NOT NULL AND sealed;
DROP TABLE inbound_message_chunk;
ALTER TABLE inbound_message DROP COLUMN raw_chunks;
