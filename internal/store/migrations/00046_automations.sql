-- +goose Up
-- Custom events and automations (issue 36). An event definition names an
-- event and optionally types its payload; every accepted event send is a
-- row of its own. An automation is a graph of steps; each save that
-- changes the graph is a new immutable version, and a run keeps the
-- version it started with. A run is one contact's way through one
-- version, started by one event send: unique per (automation, contact,
-- event), so that a retried dispatch never starts a second one.
CREATE TABLE event_definition (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name       text NOT NULL,
    schema     jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz,
    UNIQUE (team_id, name)
);

CREATE TABLE event_send (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name       text NOT NULL,
    contact_id uuid NOT NULL REFERENCES contact (id) ON DELETE CASCADE,
    payload    jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_send_contact ON event_send (contact_id, name, created_at);
CREATE INDEX event_send_team ON event_send (team_id, created_at);

CREATE TABLE automation (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name       text NOT NULL,
    status     text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    event_name text NOT NULL,
    version    int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz
);
CREATE INDEX automation_team ON automation (team_id, id DESC);
CREATE INDEX automation_trigger ON automation (team_id, event_name) WHERE status = 'enabled';

CREATE TABLE automation_version (
    automation_id uuid NOT NULL REFERENCES automation (id) ON DELETE CASCADE,
    version       int NOT NULL,
    definition    jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (automation_id, version)
);

CREATE TABLE automation_run (
    id            uuid PRIMARY KEY,
    team_id       uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    automation_id uuid NOT NULL REFERENCES automation (id) ON DELETE CASCADE,
    version       int NOT NULL,
    contact_id    uuid REFERENCES contact (id) ON DELETE SET NULL,
    event_id      uuid NOT NULL,
    status        text NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    -- The event its wait_for_event step awaits, and since when: an event
    -- send for the contact wakes the runs that wait for its name.
    waiting_event text,
    waiting_since timestamptz,
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    completed_at  timestamptz,
    UNIQUE (automation_id, contact_id, event_id)
);
CREATE INDEX automation_run_list ON automation_run (automation_id, id DESC);
-- A contact runs through an automation once at a time: concurrent event
-- sends for it start one run.
CREATE UNIQUE INDEX automation_run_contact ON automation_run (contact_id, automation_id) WHERE status = 'running';

CREATE TABLE automation_run_step (
    run_id       uuid NOT NULL REFERENCES automation_run (id) ON DELETE CASCADE,
    key          text NOT NULL,
    iteration    int NOT NULL,
    seq          int NOT NULL,
    type         text NOT NULL,
    status       text NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'skipped', 'waiting')),
    output       jsonb,
    error        jsonb,
    started_at   timestamptz,
    completed_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, key, iteration)
);

-- A contact deleted (by the API, the dashboard, an erasure or a step of
-- another run) ends its runs: they are cancelled in the same transaction,
-- and the outbox wakes their workflows so that they stop now. The run
-- whose own contact_delete step is deleting it is left running: that step
-- completes it.
-- +goose StatementBegin
CREATE FUNCTION automation_run_contact_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH ended AS (
        UPDATE automation_run SET status = 'cancelled', error = 'the contact was deleted',
            completed_at = now(), waiting_event = NULL
        WHERE contact_id = OLD.id AND status = 'running' AND NOT EXISTS (
            SELECT 1 FROM automation_run_step s WHERE s.run_id = automation_run.id
            AND s.type = 'contact_delete' AND s.status = 'running')
        RETURNING id, team_id)
    INSERT INTO outbox (kind, team_id, ref) SELECT 'automation_wake', team_id, id FROM ended;
    RETURN OLD;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER automation_run_contact_gone BEFORE DELETE ON contact
    FOR EACH ROW EXECUTE FUNCTION automation_run_contact_gone();

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import', 'inbound', 'broadcast', 'data_request',
        'automation_run', 'automation_wake'));

-- +goose Down
DELETE FROM outbox WHERE kind IN ('automation_run', 'automation_wake');
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('send_email', 'send_batch', 'webhook', 'contact_import', 'inbound', 'broadcast', 'data_request'));
DROP TRIGGER automation_run_contact_gone ON contact;
DROP FUNCTION automation_run_contact_gone();
DROP TABLE automation_run_step;
DROP TABLE automation_run;
DROP TABLE automation_version;
DROP TABLE automation;
DROP TABLE event_send;
DROP TABLE event_definition;
