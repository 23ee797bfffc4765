-- +goose Up
-- A message submitted as bytes (SMTP), kept as submitted apart from the
-- Bcc and instruction fields removed and a Message-ID and Date added. The
-- send step signs and delivers it instead of building a message from the
-- email's fields.
CREATE TABLE email_source (
    email_id uuid PRIMARY KEY REFERENCES email (id) ON DELETE CASCADE,
    data     bytea NOT NULL
);

-- +goose Down
DROP TABLE email_source;
