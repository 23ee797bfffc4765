package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Automation statuses and run statuses (Resend's).
const (
	AutomationEnabled  = "enabled"
	AutomationDisabled = "disabled"

	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// EventDefinition is one of a team's custom events: a name and, when set,
// the type of each payload field ("string", "number", "boolean", "date").
type EventDefinition struct {
	ID        uuid.UUID
	TeamID    uuid.UUID
	Name      string
	Schema    map[string]string // nil: any payload
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// EventSend is one accepted send of an event for a contact.
type EventSend struct {
	ID        uuid.UUID
	TeamID    uuid.UUID
	Name      string
	ContactID uuid.UUID
	Payload   json.RawMessage // a JSON object
	CreatedAt time.Time
}

// Automation is a team's automation and the definition (steps and
// connections, as JSON) of its current version.
type Automation struct {
	ID         uuid.UUID
	TeamID     uuid.UUID
	Name       string
	Status     string // AutomationEnabled or AutomationDisabled
	EventName  string // its trigger's
	Version    int
	Definition json.RawMessage
	CreatedAt  time.Time
	UpdatedAt  *time.Time
	// Runs counts its runs by status (ListAutomations and AutomationByID).
	Runs map[string]int
}

// AutomationRun is one contact's run through a version of an automation.
type AutomationRun struct {
	ID           uuid.UUID
	TeamID       uuid.UUID
	AutomationID uuid.UUID
	Version      int
	ContactID    *uuid.UUID // nil once the contact was deleted
	ContactEmail string     // "" once the contact was deleted
	EventID      uuid.UUID
	Status       string
	WaitingEvent *string
	WaitingSince *time.Time
	Error        *string
	CreatedAt    time.Time
	StartedAt    *time.Time
	CompletedAt  *time.Time
	Steps        []AutomationRunStep // AutomationRun only, in the order taken
}

// AutomationRunStep is one visit of a step by a run.
type AutomationRunStep struct {
	Key         string
	Iteration   int
	Seq         int
	Type        string
	Status      string // pending, running, completed, failed, skipped, waiting
	Output      json.RawMessage
	Error       json.RawMessage
	StartedAt   *time.Time
	CompletedAt *time.Time
	CreatedAt   time.Time
}

// automationRunSpace is the UUID namespace of run ids.
var automationRunSpace = uuid.MustParse("5b0d7c38-2a4e-4f52-9a51-0c7e4a1f6d21")

// AutomationRunID is the id of the run of an automation for a contact
// started by one event send: the same three give the same run, so the
// workflow ID that carries it is never started twice for one event. It
// begins with the time of the event (whose id is a UUIDv7) and is itself
// a UUIDv7, so that runs, listed by id, list newest first.
func AutomationRunID(automationID, contactID, eventID uuid.UUID) uuid.UUID {
	id := uuid.NewSHA1(automationRunSpace, []byte(automationID.String()+"/"+contactID.String()+"/"+eventID.String()))
	copy(id[:8], eventID[:8])
	id[6] = id[6]&0x0f | 0x70 // version 7; the variant is NewSHA1's
	return id
}

const eventDefColumns = `id, team_id, name, schema, created_at, updated_at`

func scanEventDef(row pgx.Row) (EventDefinition, error) {
	var e EventDefinition
	err := row.Scan(&e.ID, &e.TeamID, &e.Name, &e.Schema, &e.CreatedAt, &e.UpdatedAt)
	return e, mapErr(err)
}

// eventRefSQL finds an event definition by id or by name.
const eventRefSQL = ` WHERE team_id = @team AND (name = @ref OR id::text = @ref)`

// CreateEventDefinition stores a new event definition; a name the team
// already has is ErrConflict.
func (s *Automations) CreateEventDefinition(ctx context.Context, e EventDefinition) (EventDefinition, error) {
	got, err := scanEventDef(s.pool.QueryRow(ctx, `INSERT INTO event_definition (id, team_id, name, schema)
		VALUES (@id, @team, @name, @schema) RETURNING `+eventDefColumns,
		pgx.NamedArgs{"id": e.ID, "team": e.TeamID, "name": e.Name, "schema": e.Schema}))
	if err != nil {
		return EventDefinition{}, fmt.Errorf("creating event %q: %w", e.Name, err)
	}
	return got, nil
}

// EventDefinition returns the team's event definition by id or name.
func (s *Automations) EventDefinition(ctx context.Context, teamID uuid.UUID, ref string) (EventDefinition, error) {
	return scanEventDef(s.pool.QueryRow(ctx, `SELECT `+eventDefColumns+` FROM event_definition`+eventRefSQL,
		pgx.NamedArgs{"team": teamID, "ref": ref}))
}

// ListEventDefinitions returns a page of the team's event definitions.
func (s *Automations) ListEventDefinitions(ctx context.Context, teamID uuid.UUID, p Page) ([]EventDefinition, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+eventDefColumns+` FROM event_definition WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanEventDef)
}

// UpdateEventDefinition sets the schema of the team's event definition.
func (s *Automations) UpdateEventDefinition(ctx context.Context, teamID uuid.UUID, ref string,
	schema map[string]string) (EventDefinition, error) {
	return scanEventDef(s.pool.QueryRow(ctx, `UPDATE event_definition SET schema = @schema, updated_at = now()`+
		eventRefSQL+` RETURNING `+eventDefColumns, pgx.NamedArgs{"team": teamID, "ref": ref, "schema": schema}))
}

// DeleteEventDefinition deletes the team's event definition. Automations
// triggered by its name keep their trigger: events of that name may still
// be sent, without a schema.
func (s *Automations) DeleteEventDefinition(ctx context.Context, teamID uuid.UUID, ref string) (EventDefinition, error) {
	return scanEventDef(s.pool.QueryRow(ctx, `DELETE FROM event_definition`+eventRefSQL+` RETURNING `+eventDefColumns,
		pgx.NamedArgs{"team": teamID, "ref": ref}))
}

// SentEvent is what an event send caused.
type SentEvent struct {
	// Started is the runs it started, one per enabled automation the event
	// triggers whose run the contact was not already in.
	Started []uuid.UUID
	// Woken counts the contact's runs waiting for the event that were
	// woken.
	Woken int
}

// SendEvent records an event send and, in the same transaction, starts a
// run of every enabled automation of the team triggered by its name (the
// contact does not enter an automation it is running through: a run per
// contact at a time), and wakes the contact's runs that wait for the
// event, through the outbox.
func (s *Automations) SendEvent(ctx context.Context, e EventSend) (SentEvent, error) {
	var out SentEvent
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO event_send (id, team_id, name, contact_id, payload)
			VALUES (@id, @team, @name, @contact, @payload)`,
			pgx.NamedArgs{"id": e.ID, "team": e.TeamID, "name": e.Name, "contact": e.ContactID, "payload": e.Payload}); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT a.id, a.version FROM automation a
			WHERE a.team_id = @team AND a.event_name = @name AND a.status = 'enabled'
			AND NOT EXISTS (SELECT 1 FROM automation_run r WHERE r.contact_id = @contact
				AND r.automation_id = a.id AND r.status = 'running')
			ORDER BY a.id FOR KEY SHARE OF a`,
			pgx.NamedArgs{"team": e.TeamID, "name": e.Name, "contact": e.ContactID})
		if err != nil {
			return err
		}
		type start struct {
			automation uuid.UUID
			version    int
		}
		starts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (start, error) {
			var st start
			return st, r.Scan(&st.automation, &st.version)
		})
		if err != nil {
			return err
		}
		for _, st := range starts {
			id := AutomationRunID(st.automation, e.ContactID, e.ID)
			// A concurrent send for the contact may have started a run of
			// the automation since the query above: the unique index of
			// running runs waits for it, and then this one is not started.
			tag, err := tx.Exec(ctx, `INSERT INTO automation_run (id, team_id, automation_id, version, contact_id,
					event_id, status) VALUES (@id, @team, @automation, @version, @contact, @event, 'running')
				ON CONFLICT (contact_id, automation_id) WHERE status = 'running' DO NOTHING`,
				pgx.NamedArgs{"id": id, "team": e.TeamID, "automation": st.automation, "version": st.version,
					"contact": e.ContactID, "event": e.ID})
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @id)`,
				pgx.NamedArgs{"kind": OutboxAutomationRun, "team": e.TeamID, "id": id}); err != nil {
				return err
			}
			out.Started = append(out.Started, id)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref)
			SELECT @kind, team_id, id FROM automation_run
			WHERE contact_id = @contact AND status = 'running' AND waiting_event = @name`,
			pgx.NamedArgs{"kind": OutboxAutomationWake, "contact": e.ContactID, "name": e.Name})
		if err != nil {
			return err
		}
		out.Woken = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return SentEvent{}, fmt.Errorf("sending event %q: %w", e.Name, err)
	}
	return out, nil
}

const automationColumns = `a.id, a.team_id, a.name, a.status, a.event_name, a.version, v.definition,
	a.created_at, a.updated_at`

const automationFrom = ` FROM automation a JOIN automation_version v ON v.automation_id = a.id AND v.version = a.version`

func scanAutomation(row pgx.Row) (Automation, error) {
	var a Automation
	err := row.Scan(&a.ID, &a.TeamID, &a.Name, &a.Status, &a.EventName, &a.Version, &a.Definition,
		&a.CreatedAt, &a.UpdatedAt)
	return a, mapErr(err)
}

// CreateAutomation stores a new automation as its version 1.
func (s *Automations) CreateAutomation(ctx context.Context, a Automation) (Automation, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO automation (id, team_id, name, status, event_name, version)
			VALUES (@id, @team, @name, @status, @event, 1)`, pgx.NamedArgs{"id": a.ID, "team": a.TeamID,
			"name": a.Name, "status": a.Status, "event": a.EventName}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO automation_version (automation_id, version, definition)
			VALUES (@id, 1, @def)`, pgx.NamedArgs{"id": a.ID, "def": a.Definition})
		return err
	})
	if err != nil {
		return Automation{}, fmt.Errorf("creating automation: %w", err)
	}
	return s.AutomationByID(ctx, a.TeamID, a.ID)
}

// runCountsSQL counts an automation's runs by status.
const runCountsSQL = `SELECT status, count(*) FROM automation_run WHERE automation_id = @id GROUP BY status`

// AutomationByID returns one of the team's automations with its run
// counts.
func (s *Automations) AutomationByID(ctx context.Context, teamID, id uuid.UUID) (Automation, error) {
	a, err := scanAutomation(s.pool.QueryRow(ctx, `SELECT `+automationColumns+automationFrom+`
		WHERE a.team_id = @team AND a.id = @id`, pgx.NamedArgs{"team": teamID, "id": id}))
	if err != nil {
		return Automation{}, err
	}
	if a.Runs, err = s.runCounts(ctx, id); err != nil {
		return Automation{}, err
	}
	return a, nil
}

func (s *Automations) runCounts(ctx context.Context, id uuid.UUID) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, runCountsSQL, pgx.NamedArgs{"id": id})
	if err != nil {
		return nil, mapErr(err)
	}
	counts := map[string]int{}
	var (
		status string
		n      int
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error { counts[status] = n; return nil })
	return counts, mapErr(err)
}

// ListAutomations returns a page of the team's automations, with status
// ("" for any), each with its run counts.
func (s *Automations) ListAutomations(ctx context.Context, teamID uuid.UUID, status string, p Page) ([]Automation, bool, error) {
	q := `SELECT ` + automationColumns + automationFrom + ` WHERE a.team_id = @team`
	args := pgx.NamedArgs{"team": teamID}
	if status != "" {
		q += ` AND a.status = @status`
		args["status"] = status
	}
	list, more, err := listPage(ctx, s.Store, p, `SELECT * FROM (`+q+`) a WHERE true`, args, scanAutomation)
	if err != nil {
		return nil, false, err
	}
	for i := range list {
		if list[i].Runs, err = s.runCounts(ctx, list[i].ID); err != nil {
			return nil, false, err
		}
	}
	return list, more, nil
}

// AutomationChange is an edit of an automation: the fields set change.
// A new Definition is stored as a new version (runs in flight keep
// theirs); Status disabled cancels the automation's running runs.
type AutomationChange struct {
	Name       *string
	Status     *string
	EventName  *string
	Definition json.RawMessage
}

// UpdateAutomation applies change to one of the team's automations in one
// transaction. Disabling it (a stop) cancels its running runs and wakes
// their workflows through the outbox, so they end at once.
func (s *Automations) UpdateAutomation(ctx context.Context, teamID, id uuid.UUID, change AutomationChange) (Automation, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var version int
		if err := tx.QueryRow(ctx, `SELECT version FROM automation WHERE team_id = @team AND id = @id FOR UPDATE`,
			pgx.NamedArgs{"team": teamID, "id": id}).Scan(&version); err != nil {
			return err
		}
		if change.Definition != nil {
			version++
			if _, err := tx.Exec(ctx, `INSERT INTO automation_version (automation_id, version, definition)
				VALUES (@id, @version, @def)`, pgx.NamedArgs{"id": id, "version": version, "def": change.Definition}); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE automation SET name = coalesce(@name, name), status = coalesce(@status, status),
			event_name = coalesce(@event, event_name), version = @version, updated_at = now() WHERE id = @id`,
			pgx.NamedArgs{"id": id, "name": change.Name, "status": change.Status, "event": change.EventName,
				"version": version}); err != nil {
			return err
		}
		if change.Status != nil && *change.Status == AutomationDisabled {
			return cancelRuns(ctx, tx, id, "the automation was stopped")
		}
		return nil
	})
	if err != nil {
		return Automation{}, fmt.Errorf("updating automation %s: %w", id, err)
	}
	return s.AutomationByID(ctx, teamID, id)
}

// cancelRuns cancels the running runs of an automation and wakes their
// workflows.
func cancelRuns(ctx context.Context, tx pgx.Tx, automationID uuid.UUID, reason string) error {
	_, err := tx.Exec(ctx, `WITH ended AS (
			UPDATE automation_run SET status = 'cancelled', error = @reason, completed_at = now(), waiting_event = NULL
			WHERE automation_id = @id AND status = 'running' RETURNING id, team_id)
		INSERT INTO outbox (kind, team_id, ref) SELECT @kind, team_id, id FROM ended`,
		pgx.NamedArgs{"id": automationID, "reason": reason, "kind": OutboxAutomationWake})
	return err
}

// DeleteAutomation deletes one of the team's automations, its versions and
// its runs' records; the workflows of its running runs are woken and end
// at once, cancelled.
func (s *Automations) DeleteAutomation(ctx context.Context, teamID, id uuid.UUID) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var found uuid.UUID
		if err := tx.QueryRow(ctx, `SELECT id FROM automation WHERE team_id = @team AND id = @id FOR UPDATE`,
			pgx.NamedArgs{"team": teamID, "id": id}).Scan(&found); err != nil {
			return err
		}
		if err := cancelRuns(ctx, tx, id, "the automation was deleted"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM automation WHERE id = @id`, pgx.NamedArgs{"id": id})
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting automation %s: %w", id, err)
	}
	return nil
}

const runColumns = `r.id, r.team_id, r.automation_id, r.version, r.contact_id, coalesce(c.email, ''), r.event_id,
	r.status, r.waiting_event, r.waiting_since, r.error, r.created_at, r.started_at, r.completed_at`

const runFrom = ` FROM automation_run r LEFT JOIN contact c ON c.id = r.contact_id`

func scanRun(row pgx.Row) (AutomationRun, error) {
	var r AutomationRun
	err := row.Scan(&r.ID, &r.TeamID, &r.AutomationID, &r.Version, &r.ContactID, &r.ContactEmail, &r.EventID,
		&r.Status, &r.WaitingEvent, &r.WaitingSince, &r.Error, &r.CreatedAt, &r.StartedAt, &r.CompletedAt)
	return r, mapErr(err)
}

// ListAutomationRuns returns a page of the runs of one of the team's
// automations, newest first, with one of statuses (none: any). An
// automation the team does not have is ErrNotFound.
func (s *Automations) ListAutomationRuns(ctx context.Context, teamID, automationID uuid.UUID, statuses []string,
	p Page) ([]AutomationRun, bool, error) {
	var found uuid.UUID
	if err := s.pool.QueryRow(ctx, `SELECT id FROM automation WHERE team_id = @team AND id = @id`,
		pgx.NamedArgs{"team": teamID, "id": automationID}).Scan(&found); err != nil {
		return nil, false, mapErr(err)
	}
	q := `SELECT * FROM (SELECT ` + runColumns + runFrom + ` WHERE r.team_id = @team AND r.automation_id = @automation`
	args := pgx.NamedArgs{"team": teamID, "automation": automationID}
	if len(statuses) > 0 {
		q += ` AND r.status = ANY (@statuses)`
		args["statuses"] = statuses
	}
	return listPage(ctx, s.Store, p, q+`) r WHERE true`, args, scanRun)
}

// AutomationRun returns one run of one of the team's automations with its
// steps in the order taken.
func (s *Automations) AutomationRun(ctx context.Context, teamID, automationID, runID uuid.UUID) (AutomationRun, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+runFrom+`
		WHERE r.team_id = @team AND r.automation_id = @automation AND r.id = @id`,
		pgx.NamedArgs{"team": teamID, "automation": automationID, "id": runID}))
	if err != nil {
		return AutomationRun{}, err
	}
	if r.Steps, err = s.runSteps(ctx, runID); err != nil {
		return AutomationRun{}, err
	}
	return r, nil
}

func (s *Automations) runSteps(ctx context.Context, runID uuid.UUID) ([]AutomationRunStep, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, iteration, seq, type, status, output, error, started_at,
		completed_at, created_at FROM automation_run_step WHERE run_id = @id ORDER BY seq, key`, pgx.NamedArgs{"id": runID})
	if err != nil {
		return nil, mapErr(err)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AutomationRunStep, error) {
		var st AutomationRunStep
		err := r.Scan(&st.Key, &st.Iteration, &st.Seq, &st.Type, &st.Status, &st.Output, &st.Error, &st.StartedAt,
			&st.CompletedAt, &st.CreatedAt)
		return st, err
	})
	return steps, mapErr(err)
}

// RunPlan is what a run's workflow interprets: its run row and the
// definition of its version; start marks the run started (its workflow's
// first step). A run whose automation was deleted is ErrNotFound.
func (s *Automations) RunPlan(ctx context.Context, runID uuid.UUID, start bool) (AutomationRun, json.RawMessage, error) {
	var def json.RawMessage
	var r AutomationRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if start {
			if _, err = tx.Exec(ctx, `UPDATE automation_run SET started_at = coalesce(started_at, now()) WHERE id = @id`,
				pgx.NamedArgs{"id": runID}); err != nil {
				return err
			}
		}
		if r, err = scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+runFrom+` WHERE r.id = @id`,
			pgx.NamedArgs{"id": runID})); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT definition FROM automation_version WHERE automation_id = @a AND version = @v`,
			pgx.NamedArgs{"a": r.AutomationID, "v": r.Version}).Scan(&def)
	})
	return r, def, err
}

// Run returns a run by id, with its contact's address.
func (s *Automations) Run(ctx context.Context, runID uuid.UUID) (AutomationRun, error) {
	return scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+runFrom+` WHERE r.id = @id`, pgx.NamedArgs{"id": runID}))
}

// StepRecord is the state of one visit of a step, as RecordStep writes it.
type StepRecord struct {
	RunID     uuid.UUID
	Key       string
	Iteration int
	Seq       int
	Type      string
	Status    string
	Output    any // JSON-encoded; nil keeps what was recorded
	Error     any // JSON-encoded; nil clears it
	// WaitingEvent, for a waiting wait_for_event step, is the event the
	// run now awaits: an event of that name sent for its contact wakes it.
	WaitingEvent *string
}

// Final reports whether the record ends its visit: completed, failed or
// skipped.
func (r StepRecord) Final() bool {
	return r.Status == "completed" || r.Status == "failed" || r.Status == "skipped"
}

// RecordStep writes the state of one visit of a step, if its run is still
// running (false otherwise: the run was cancelled, or is gone). The first
// write of the visit sets its start; a final state sets its end. Writing
// the same state again changes nothing but the time of a final state.
func (s *Automations) RecordStep(ctx context.Context, rec StepRecord) (running bool, err error) {
	return s.RecordSteps(ctx, []StepRecord{rec}, nil)
}

// RunEnd is how a run ended: RunCompleted, or RunFailed with the reason.
type RunEnd struct {
	Status string
	Error  string
}

// RecordSteps writes the visits recs of one run's steps, in order, as
// RecordStep does, and then, when end is set, ends the run as FinishRun
// does, in one transaction: a run records a step it completed without a
// call of its own with its next one, and its last step with its end.
func (s *Automations) RecordSteps(ctx context.Context, recs []StepRecord, end *RunEnd) (running bool, err error) {
	if len(recs) == 0 {
		return false, errors.New("store: no step to record")
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return recordSteps(ctx, tx, recs, end, &running)
	})
	return running, err
}

func recordSteps(ctx context.Context, tx pgx.Tx, recs []StepRecord, end *RunEnd, running *bool) error {
	runID := recs[0].RunID
	var (
		status  string
		waiting *time.Time
	)
	err := tx.QueryRow(ctx, `SELECT status, waiting_since FROM automation_run WHERE id = @id FOR UPDATE`,
		pgx.NamedArgs{"id": runID}).Scan(&status, &waiting)
	if errors.Is(err, pgx.ErrNoRows) {
		*running = false
		return nil
	}
	if err != nil {
		return err
	}
	if *running = status == RunRunning; !*running {
		return nil
	}
	// What the run waits for after the steps: the event of the last
	// waiting wait_for_event, or nothing once a step after it is final.
	var awaits *string
	clear := false
	for _, rec := range recs {
		if rec.RunID != runID {
			return fmt.Errorf("store: steps of runs %s and %s recorded together", runID, rec.RunID)
		}
		final := rec.Final()
		if _, err := tx.Exec(ctx, `INSERT INTO automation_run_step (run_id, key, iteration, seq, type, status, output,
				error, started_at, completed_at)
			VALUES (@run, @key, @iteration, @seq, @type, @status, @output, @error, now(), CASE WHEN @final THEN now() END)
			ON CONFLICT (run_id, key, iteration) DO UPDATE SET status = EXCLUDED.status,
				output = coalesce(EXCLUDED.output, automation_run_step.output), error = EXCLUDED.error,
				completed_at = EXCLUDED.completed_at`,
			pgx.NamedArgs{"run": rec.RunID, "key": rec.Key, "iteration": rec.Iteration, "seq": rec.Seq, "type": rec.Type,
				"status": rec.Status, "output": rec.Output, "error": rec.Error, "final": final}); err != nil {
			return err
		}
		switch {
		case rec.WaitingEvent != nil:
			awaits, clear = rec.WaitingEvent, false
		case final:
			awaits, clear = nil, true
		}
	}
	switch {
	case end != nil:
		return finishRun(ctx, tx, runID, end.Status, end.Error)
	case awaits != nil:
		_, err = tx.Exec(ctx, `UPDATE automation_run SET waiting_event = @event,
			waiting_since = coalesce(waiting_since, now()) WHERE id = @id`,
			pgx.NamedArgs{"id": runID, "event": *awaits})
	case clear && waiting != nil:
		_, err = tx.Exec(ctx, `UPDATE automation_run SET waiting_event = NULL, waiting_since = NULL WHERE id = @id`,
			pgx.NamedArgs{"id": runID})
	}
	return err
}

// EventsSince returns the events of a name sent for a run's contact since
// the run began waiting for them, oldest first (at most limit), those
// after the event after when it is not nil (the last of a previous page).
func (s *Automations) EventsSince(ctx context.Context, runID uuid.UUID, name string, after *EventSend,
	limit int) ([]EventSend, error) {
	args := pgx.NamedArgs{"id": runID, "name": name, "limit": limit}
	page := ``
	if after != nil {
		page = ` AND (e.created_at, e.id) > (@after_at, @after_id)`
		args["after_at"], args["after_id"] = after.CreatedAt, after.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.team_id, e.name, e.contact_id, e.payload, e.created_at
		FROM automation_run r JOIN event_send e ON e.contact_id = r.contact_id AND e.name = @name
			AND e.created_at >= r.waiting_since`+page+`
		WHERE r.id = @id ORDER BY e.created_at, e.id LIMIT @limit`, args)
	if err != nil {
		return nil, mapErr(err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[EventSend])
	return list, mapErr(err)
}

// EventSendByID returns one event send.
func (s *Automations) EventSendByID(ctx context.Context, id uuid.UUID) (EventSend, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, team_id, name, contact_id, payload, created_at FROM event_send
		WHERE id = @id`, pgx.NamedArgs{"id": id})
	if err != nil {
		return EventSend{}, mapErr(err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[EventSend])
	return e, mapErr(err)
}

// FinishRun ends a running run with status (RunCompleted or RunFailed)
// and, when failed, the reason; a run no longer running is left as it is.
func (s *Automations) FinishRun(ctx context.Context, runID uuid.UUID, status, reason string) error {
	return mapErr(finishRun(ctx, s.pool, runID, status, reason))
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func finishRun(ctx context.Context, q execer, runID uuid.UUID, status, reason string) error {
	var why *string
	if reason != "" {
		why = &reason
	}
	_, err := q.Exec(ctx, `UPDATE automation_run SET status = @status, error = @reason, completed_at = now(),
		waiting_event = NULL, waiting_since = NULL WHERE id = @id AND status = 'running'`,
		pgx.NamedArgs{"id": runID, "status": status, "reason": why})
	return err
}
