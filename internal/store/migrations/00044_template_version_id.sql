-- +goose Up
-- A template's published version gets an id of its own, Resend's
-- `current_version_id`: a new one on every publish, null for a template
-- never published (issue 35 point 5). Templates published before this
-- migration get one now.
ALTER TABLE template ADD COLUMN published_version_id uuid;
UPDATE template SET published_version_id = gen_random_uuid() WHERE published IS NOT NULL;
ALTER TABLE template ADD CHECK ((published IS NULL) = (published_version_id IS NULL));

-- +goose Down
ALTER TABLE template DROP COLUMN published_version_id;
