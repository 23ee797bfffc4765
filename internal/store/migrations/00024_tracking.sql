-- +goose Up
-- Open and click tracking (issue 19 points 1 and 2): the label of the
-- domain's tracking subdomain, <tracking_subdomain>.<domain>, a CNAME to
-- the operator's tracking host that tracked links and open pixels use.
ALTER TABLE domain ADD COLUMN tracking_subdomain text NOT NULL DEFAULT 'links';
-- The API routes a request whose Host is a domain's tracking host to the
-- tracking endpoints.
CREATE INDEX domain_tracking_host ON domain (name) WHERE deleted_at IS NULL AND (open_tracking OR click_tracking);

-- +goose Down
DROP INDEX domain_tracking_host;
ALTER TABLE domain DROP COLUMN tracking_subdomain;
