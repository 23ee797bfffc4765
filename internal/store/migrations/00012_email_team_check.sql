-- +goose Up
-- email.team_id keeps the guarantees of its foreign key (the team exists
-- when the email is written and cannot be deleted until that transaction
-- ends; deleting a team deletes its emails; an email never points at a
-- team that is gone) with one check per statement instead of one per row.
-- A batch inserts a hundred emails of one team in one statement: the
-- row-by-row check locked the same team row a hundred times, a third of
-- what the insert cost.
ALTER TABLE email DROP CONSTRAINT email_team_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION email_team_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    teams bigint;
    locked bigint;
BEGIN
    SELECT count(DISTINCT team_id) INTO teams FROM new_emails;
    -- Lock every team as a foreign-key check does: a concurrent DELETE of
    -- the team waits for this transaction, and a team deleted meanwhile is
    -- not locked, so it is missing from the count.
    PERFORM 1 FROM team WHERE id IN (SELECT team_id FROM new_emails) FOR KEY SHARE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked <> teams THEN
        RAISE EXCEPTION 'insert on table "email" violates foreign key constraint "email_team_check"'
            USING ERRCODE = 'foreign_key_violation', TABLE = 'email', CONSTRAINT = 'email_team_check',
                DETAIL = 'A team_id is not present in table "team".';
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER email_team_check AFTER INSERT ON email
    REFERENCING NEW TABLE AS new_emails FOR EACH STATEMENT EXECUTE FUNCTION email_team_check();

-- Emails never change team, and teams never change id: both would escape
-- the check above, so both are refused.
-- +goose StatementBegin
CREATE FUNCTION refuse_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% of table "%" cannot change', TG_ARGV[0], TG_TABLE_NAME
        USING ERRCODE = 'foreign_key_violation', TABLE = TG_TABLE_NAME;
END $$;
-- +goose StatementEnd

CREATE TRIGGER email_team_fixed BEFORE UPDATE OF team_id ON email
    FOR EACH ROW WHEN (OLD.team_id IS DISTINCT FROM NEW.team_id) EXECUTE FUNCTION refuse_key_change('team_id');
CREATE TRIGGER team_id_fixed BEFORE UPDATE OF id ON team
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION refuse_key_change('id');

-- Deleting a team deletes its emails, as ON DELETE CASCADE did. Before the
-- team row goes (and with it, by their own cascades, the domains its
-- emails may still point at), with that row already locked.
-- +goose StatementBegin
CREATE FUNCTION team_delete_emails() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM email WHERE team_id = OLD.id;
    RETURN OLD;
END $$;
-- +goose StatementEnd

CREATE TRIGGER team_delete_emails BEFORE DELETE ON team
    FOR EACH ROW EXECUTE FUNCTION team_delete_emails();

-- +goose Down
DROP TRIGGER team_delete_emails ON team;
DROP FUNCTION team_delete_emails();
DROP TRIGGER team_id_fixed ON team;
DROP TRIGGER email_team_fixed ON email;
DROP FUNCTION refuse_key_change();
DROP TRIGGER email_team_check ON email;
DROP FUNCTION email_team_check();
ALTER TABLE email ADD CONSTRAINT email_team_id_fkey FOREIGN KEY (team_id) REFERENCES team (id) ON DELETE CASCADE;
