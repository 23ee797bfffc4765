-- +goose Up
-- The template an email was rendered from (issue 35 point 3): its webhook
-- events name it (template_id), as Resend's do. No foreign key: deleting
-- a template leaves the emails sent with it naming it.
ALTER TABLE email ADD COLUMN template_id uuid;

-- +goose Down
ALTER TABLE email DROP COLUMN template_id;
