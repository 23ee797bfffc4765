-- +goose Up
-- Opens and clicks move a delivered recipient's state forward (delivered →
-- opened → clicked), as Resend's recipients show them. Both stay final
-- states of a delivery: retention purges such emails like delivered ones.
-- NOT VALID then VALIDATE: the table is not locked against writes while
-- existing rows are checked (they all pass: the new list only grows).
ALTER TABLE email DROP CONSTRAINT email_rcpt_status,
    ADD CONSTRAINT email_rcpt_status CHECK (rcpt_status <@ ARRAY['scheduled', 'queued', 'sent', 'delivered',
        'delivery_delayed', 'bounced', 'complained', 'failed', 'canceled', 'suppressed', 'opened', 'clicked']) NOT VALID;
ALTER TABLE email VALIDATE CONSTRAINT email_rcpt_status;

-- +goose Down
UPDATE email SET rcpt_status = (SELECT array_agg(CASE WHEN st IN ('opened', 'clicked') THEN 'delivered' ELSE st END
        ORDER BY n) FROM unnest(rcpt_status) WITH ORDINALITY AS r(st, n))
    WHERE rcpt_status && ARRAY['opened', 'clicked'];
ALTER TABLE email DROP CONSTRAINT email_rcpt_status,
    ADD CONSTRAINT email_rcpt_status CHECK (rcpt_status <@ ARRAY['scheduled', 'queued', 'sent', 'delivered',
        'delivery_delayed', 'bounced', 'complained', 'failed', 'canceled', 'suppressed']);
