-- +goose Up
-- Return paths are per recipient (bounces+<code>@..., the code naming the
-- email and the recipient's index under an HMAC) from this migration on.
-- The per-email forms every recipient of an email shared
-- (bounces+<email id>[-<signature>]@...) are still routed for the emails
-- created before per_recipient_since, which were sent with them, and then
-- only for a report that names a single recipient of the email; for any
-- later email only a per-recipient return path is.
CREATE TABLE return_path_recipient (
    only_row            boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    per_recipient_since timestamptz NOT NULL DEFAULT now()
);
INSERT INTO return_path_recipient DEFAULT VALUES;

-- +goose Down
DROP TABLE return_path_recipient;
