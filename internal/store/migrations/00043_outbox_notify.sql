-- +goose Up
-- Every insert into the outbox wakes the dispatchers of every process
-- (issue 34 point 4): the trigger sends a notification on the channel
-- posthaste_outbox, which PostgreSQL delivers when the inserting
-- transaction commits (and never when it rolls back). Dispatchers LISTEN
-- on a connection of their own and keep polling as a fallback. The
-- statement-level trigger sends at most one notification per statement,
-- and none for statements that inserted no row (an email event with no
-- subscribed endpoint); PostgreSQL folds identical notifications of one
-- transaction into one.
-- +goose StatementBegin
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted) THEN
        PERFORM pg_notify('posthaste_outbox', '');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION outbox_notify();
