-- +goose Up
-- Accepting an email writes one row: the email's own. Its recipients and
-- their delivery states move into it, and its first event (queued, or
-- scheduled) is read from it rather than stored beside it.
--
-- Until now every accepted email also wrote a recipient row per address
-- and a first event row, each with its index entries and a foreign-key
-- check against the email: two thirds of what a batch of a hundred cost
-- PostgreSQL. The recipients were only ever read and written with their
-- email (the same row lock guarded both), so they lose nothing by living
-- in it, and the reads of an email take one query instead of two.

-- Recipient i of an email is rcpt_addrs[i] (as submitted; one entry per
-- address whatever fields name it), rcpt_kinds[i] (to, cc or bcc),
-- rcpt_domains[i] and its delivery state rcpt_status[i].
ALTER TABLE email
    ADD COLUMN rcpt_addrs   text[] NOT NULL DEFAULT '{}',
    ADD COLUMN rcpt_kinds   text[] NOT NULL DEFAULT '{}',
    ADD COLUMN rcpt_domains text[] NOT NULL DEFAULT '{}',
    ADD COLUMN rcpt_status  text[] NOT NULL DEFAULT '{}';

UPDATE email e SET rcpt_addrs = r.addrs, rcpt_kinds = r.kinds, rcpt_domains = r.domains, rcpt_status = r.status
FROM (SELECT email_id, array_agg(address ORDER BY position) AS addrs, array_agg(kind ORDER BY position) AS kinds,
        array_agg(domain ORDER BY position) AS domains, array_agg(status ORDER BY position) AS status
    FROM email_recipient GROUP BY email_id) r
WHERE r.email_id = e.id;

-- distinct_elements reports whether no element of a occurs twice.
-- +goose StatementBegin
CREATE FUNCTION distinct_elements(a text[]) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT count(DISTINCT x) = count(*) FROM unnest(a) AS x);
-- +goose StatementEnd

-- The four arrays are equally long and name each address once, as the
-- primary key of email_recipient did (most emails have one recipient and
-- skip the function call).
ALTER TABLE email
    ALTER COLUMN rcpt_addrs DROP DEFAULT,
    ALTER COLUMN rcpt_kinds DROP DEFAULT,
    ALTER COLUMN rcpt_domains DROP DEFAULT,
    ALTER COLUMN rcpt_status DROP DEFAULT,
    ADD CONSTRAINT email_rcpt_shape CHECK (
        cardinality(rcpt_kinds) = cardinality(rcpt_addrs)
        AND cardinality(rcpt_domains) = cardinality(rcpt_addrs)
        AND cardinality(rcpt_status) = cardinality(rcpt_addrs)
        AND array_position(rcpt_addrs, NULL) IS NULL
        AND (cardinality(rcpt_addrs) < 2 OR distinct_elements(rcpt_addrs))),
    ADD CONSTRAINT email_rcpt_kinds CHECK (rcpt_kinds <@ ARRAY['to', 'cc', 'bcc']),
    ADD CONSTRAINT email_rcpt_status CHECK (rcpt_status <@ ARRAY['scheduled', 'queued', 'sent', 'delivered',
        'delivery_delayed', 'bounced', 'complained', 'failed', 'canceled', 'suppressed']);

DROP TABLE email_recipient;

-- The first event of an email is its acceptance: `scheduled` when it was
-- accepted with a time to leave (scheduled_at is never cleared afterwards),
-- `queued` otherwise, at created_at. Nothing else records those two types.
DELETE FROM email_event WHERE type IN ('queued', 'scheduled');

-- The retention sweep only ever looks for emails that left the queue, so
-- its index leaves out the queued and scheduled ones: an accepted email
-- enters it when it leaves (an update that rewrites every index entry of
-- the row anyway), not at acceptance.
DROP INDEX email_updated_at;
CREATE INDEX email_updated_at ON email (updated_at) WHERE last_event NOT IN ('scheduled', 'queued');

-- +goose Down
DROP INDEX email_updated_at;
CREATE INDEX email_updated_at ON email (updated_at);

INSERT INTO email_event (email_id, type, created_at)
SELECT id, CASE WHEN scheduled_at IS NULL THEN 'queued' ELSE 'scheduled' END, created_at FROM email;

CREATE TABLE email_recipient (
    email_id   uuid NOT NULL REFERENCES email (id) ON DELETE CASCADE,
    address    text NOT NULL,
    position   int NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('to', 'cc', 'bcc')),
    domain     text NOT NULL,
    status     text NOT NULL CHECK (status IN ('scheduled', 'queued', 'sent', 'delivered',
                   'delivery_delayed', 'bounced', 'complained', 'failed', 'canceled', 'suppressed')),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (email_id, address)
);
INSERT INTO email_recipient (email_id, address, position, kind, domain, status, updated_at)
SELECT e.id, r.address, r.position, r.kind, r.domain, r.status, e.updated_at
FROM email e, unnest(e.rcpt_addrs, e.rcpt_kinds, e.rcpt_domains, e.rcpt_status)
    WITH ORDINALITY AS r(address, kind, domain, status, position);

ALTER TABLE email DROP CONSTRAINT email_rcpt_shape, DROP CONSTRAINT email_rcpt_kinds, DROP CONSTRAINT email_rcpt_status,
    DROP COLUMN rcpt_addrs, DROP COLUMN rcpt_kinds, DROP COLUMN rcpt_domains, DROP COLUMN rcpt_status;
DROP FUNCTION distinct_elements(text[]);
