-- +goose Up
-- Each outbox entry backs off on its own. An entry whose start failed is
-- tried again at next_attempt_at (later and later, see internal/outbox),
-- so entries that cannot start no longer hold the head of the queue that
-- every team's mail waits behind. attempts counts the failed starts and
-- last_error keeps the latest failure for operators. A new entry is due at
-- once: next_attempt_at defaults to its transaction's time (now() is
-- stable, so the existing rows get it without a table rewrite).
ALTER TABLE outbox
    ADD COLUMN attempts        int NOT NULL DEFAULT 0,
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN last_error      text;

-- The drain claims due entries in the order they became due: a range scan
-- of this index that never visits an entry that is not due.
CREATE INDEX outbox_due ON outbox (next_attempt_at, id);

-- +goose Down
DROP INDEX outbox_due;
ALTER TABLE outbox DROP COLUMN last_error, DROP COLUMN next_attempt_at, DROP COLUMN attempts;
