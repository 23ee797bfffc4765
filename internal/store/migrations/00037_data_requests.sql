-- +goose Up
-- Data subject requests (POST /data-requests): an export of everything a
-- team holds about one email address, or its erasure. The DataRequest
-- workflow does the work. The address is kept sealed with the master key
-- (associated data: the request id) and cleared when an erasure
-- completes, so the request itself does not keep what it erased; found
-- counts what the request found (export) or removed (erasure).
CREATE TABLE data_request (
    id           uuid PRIMARY KEY,
    team_id      uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    type         text NOT NULL CHECK (type IN ('export', 'erasure')),
    status       text NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'completed', 'failed')),
    address      bytea,
    found        jsonb NOT NULL DEFAULT '{}',
    error        text,
    -- Export archives: size in bytes and when the archive is removed.
    archive_size bigint,
    expires_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    UNIQUE (team_id, id)
);
CREATE INDEX data_request_team ON data_request (team_id, id DESC);

-- The zip archive of a completed export, in chunks of at most 1 MiB, each
-- sealed with the master key (associated data: request id and seq). The
-- retention sweep deletes chunks past expires_at.
CREATE TABLE data_request_archive (
    request_id uuid NOT NULL REFERENCES data_request (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    data       bytea NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (request_id, seq)
);
CREATE INDEX data_request_archive_expires ON data_request_archive (expires_at);

-- scrub_text_array replaces every match of the regular expression re
-- (case-insensitive) in each element of a by ph, keeping the order.
CREATE FUNCTION scrub_text_array(a text[], re text, ph text) RETURNS text[]
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(regexp_replace(x, re, ph, 'gi') ORDER BY n), '{}')
    FROM unnest(a) WITH ORDINALITY AS u(x, n)
$$;

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import', 'inbound', 'broadcast', 'data_request'));

-- +goose Down
DELETE FROM outbox WHERE kind = 'data_request';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import', 'inbound', 'broadcast'));
DROP FUNCTION scrub_text_array(text[], text, text);
DROP TABLE data_request_archive;
DROP TABLE data_request;
