-- +goose Up
-- A CSV of contacts uploaded for import (Resend's Contact Imports API).
-- The upload writes the import, its chunks and an outbox entry in one
-- transaction; the ContactImport workflow then applies the chunks one by
-- one. The counters are the sums over the chunks applied so far.
CREATE TABLE contact_import (
    id           uuid PRIMARY KEY,
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    status       text NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'in_progress', 'completed', 'failed')),
    on_conflict  text NOT NULL CHECK (on_conflict IN ('skip', 'upsert')),
    segment_ids  uuid[] NOT NULL DEFAULT '{}',
    -- topics: [{"id", "subscription"}], applied to imported contacts.
    topics       jsonb NOT NULL DEFAULT '[]',
    chunks       integer NOT NULL DEFAULT 0,
    total        integer NOT NULL DEFAULT 0,
    processed    integer NOT NULL DEFAULT 0,
    created      integer NOT NULL DEFAULT 0,
    updated      integer NOT NULL DEFAULT 0,
    skipped      integer NOT NULL DEFAULT 0,
    failed       integer NOT NULL DEFAULT 0,
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    UNIQUE (team_id, id)
);
CREATE INDEX contact_import_team ON contact_import (team_id, id DESC);

-- A run of consecutive rows of an import, validated at upload: rows holds
-- the valid ones as [{"r": row number, "e": address, "f", "l", "u", "p":
-- properties}] (f, l, u, p null when the row leaves them empty), errors the
-- rows that failed as [{"row", "email", "reason"}]. Applying a chunk sets
-- done and its counts and empties rows in the same transaction, so applying
-- it again changes nothing.
CREATE TABLE contact_import_chunk (
    import_id uuid NOT NULL REFERENCES contact_import (id) ON DELETE CASCADE,
    seq       integer NOT NULL,
    first_row integer NOT NULL,
    rows      jsonb NOT NULL,
    errors    jsonb NOT NULL DEFAULT '[]',
    done      boolean NOT NULL DEFAULT false,
    created   integer NOT NULL DEFAULT 0,
    updated   integer NOT NULL DEFAULT 0,
    skipped   integer NOT NULL DEFAULT 0,
    failed    integer NOT NULL DEFAULT 0,
    PRIMARY KEY (import_id, seq)
);

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import'));

-- +goose Down
DELETE FROM outbox WHERE kind = 'contact_import';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('send_email', 'send_batch', 'webhook'));
DROP TABLE contact_import_chunk;
DROP TABLE contact_import;
