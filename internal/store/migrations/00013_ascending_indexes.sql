-- +goose Up
-- Ids are UUIDv7 and seq an identity: each new row has the largest key of
-- its team (or endpoint). In a descending index that key goes before all
-- the others, where B-tree page splits leave both halves half full; in an
-- ascending one it goes after them, where PostgreSQL splits so that the
-- full page stays full. The same rows take about half the index pages
-- (measured: 2.5 MB against 4.5 MB for 50,000 emails of one team), and
-- the newest-first lists read the ascending index backwards at the same
-- cost. These are the tables written on every send, API request and
-- webhook event.
DROP INDEX email_team_id;
CREATE INDEX email_team_id ON email (team_id, id);
DROP INDEX request_log_team_id;
CREATE INDEX request_log_team_id ON request_log (team_id, id);
DROP INDEX webhook_message_list;
CREATE INDEX webhook_message_list ON webhook_message (webhook_id, seq);

-- +goose Down
DROP INDEX webhook_message_list;
CREATE INDEX webhook_message_list ON webhook_message (webhook_id, seq DESC);
DROP INDEX request_log_team_id;
CREATE INDEX request_log_team_id ON request_log (team_id, id DESC);
DROP INDEX email_team_id;
CREATE INDEX email_team_id ON email (team_id, id DESC);
