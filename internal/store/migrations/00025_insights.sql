-- +goose Up
-- Deliverability insights (issue 19 point 4): the findings computed when
-- an email was accepted, [{"code","severity","message","fix"}].
ALTER TABLE email ADD COLUMN insights jsonb NOT NULL DEFAULT '[]';
-- The p= value of the DMARC record the domain's last verification found,
-- lower case; '' when it found none; NULL until a verification looked.
-- Acceptance reads it, so insights need no DNS lookup.
ALTER TABLE domain ADD COLUMN dmarc_policy text;

-- +goose Down
ALTER TABLE domain DROP COLUMN dmarc_policy;
ALTER TABLE email DROP COLUMN insights;
