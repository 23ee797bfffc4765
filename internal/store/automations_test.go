package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// autoDB is a store and a pool of the test's own on its database, for
// the rows no method reads (the outbox).
type autoDB struct {
	t   *testing.T
	ctx context.Context
	st  *store.Store
	db  *pgxpool.Pool
}

func newAutoDB(t *testing.T) *autoDB {
	t.Helper()
	ctx := context.Background()
	st, url := storetest.NewWithURL(t)
	db, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return &autoDB{t: t, ctx: ctx, st: st, db: db}
}

// autoDefinition is a definition triggered by event, as the store keeps
// it (it does not read it).
func autoDefinition(event string) json.RawMessage {
	return json.RawMessage(`{"steps":[{"key":"start","type":"trigger","config":{"event_name":"` + event +
		`"}}],"connections":[]}`)
}

func (d *autoDB) automation(team uuid.UUID, event, status string) store.Automation {
	d.t.Helper()
	a, err := d.st.Automations.CreateAutomation(d.ctx, store.Automation{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Name: "a", Status: status, EventName: event, Definition: autoDefinition(event)})
	require.NoError(d.t, err)
	return a
}

func (d *autoDB) contact(team uuid.UUID, email string) store.Contact {
	d.t.Helper()
	ct, err := d.st.Audience.CreateContact(d.ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team, Email: email},
		nil, nil)
	require.NoError(d.t, err)
	return ct
}

func (d *autoDB) send(team, contact uuid.UUID, name, payload string) (store.EventSend, store.SentEvent) {
	d.t.Helper()
	e := store.EventSend{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: name, ContactID: contact,
		Payload: json.RawMessage(payload)}
	res, err := d.st.Automations.SendEvent(d.ctx, e)
	require.NoError(d.t, err)
	return e, res
}

func (d *autoDB) outbox(kind string, ref uuid.UUID) int {
	d.t.Helper()
	var n int
	require.NoError(d.t, d.db.QueryRow(d.ctx, `SELECT count(*) FROM outbox WHERE kind = $1 AND ref = $2`, kind, ref).Scan(&n))
	return n
}

// newRunningRun returns a fresh database with a team, its automation of
// the event "go", a contact and the run an event for it started.
func newRunningRun(t *testing.T) (d *autoDB, team uuid.UUID, a store.Automation, ct store.Contact, run uuid.UUID) {
	t.Helper()
	d = newAutoDB(t)
	team = newTeam(t, d.st)
	a = d.automation(team, "go", store.AutomationEnabled)
	ct = d.contact(team, "ann@example.com")
	_, res := d.send(team, ct.ID, "go", `{}`)
	return d, team, a, ct, res.Started[0]
}

func (d *autoDB) run(id uuid.UUID) store.AutomationRun {
	d.t.Helper()
	r, err := d.st.Automations.Run(d.ctx, id)
	require.NoError(d.t, err)
	return r
}

// TestAutomationSendEventStartsAndWakesRuns: an event send starts a run
// of each enabled automation of the team it triggers, with the id
// AutomationRunID gives and an automation_run outbox entry, and wakes
// the contact's runs waiting for it; a contact running through an
// automation does not enter it again until that run ended.
func TestAutomationSendEventStartsAndWakesRuns(t *testing.T) {
	t.Parallel()
	d := newAutoDB(t)
	team, other := newTeam(t, d.st), newTeam(t, d.st)
	a1 := d.automation(team, "signed_up", store.AutomationEnabled)
	a2 := d.automation(team, "signed_up", store.AutomationEnabled)
	off := d.automation(team, "signed_up", store.AutomationDisabled)
	elsewhere := d.automation(team, "paid", store.AutomationEnabled)
	foreign := d.automation(other, "signed_up", store.AutomationEnabled)
	ct := d.contact(team, "ann@example.com")

	ev, res := d.send(team, ct.ID, "signed_up", `{"plan":"pro"}`)
	want := []uuid.UUID{store.AutomationRunID(a1.ID, ct.ID, ev.ID), store.AutomationRunID(a2.ID, ct.ID, ev.ID)}
	require.Equal(t, want, res.Started)
	require.Zero(t, res.Woken)
	for i, id := range want {
		r := d.run(id)
		require.Equal(t, []uuid.UUID{a1.ID, a2.ID}[i], r.AutomationID)
		require.Equal(t, team, r.TeamID)
		require.Equal(t, 1, r.Version)
		require.Equal(t, ev.ID, r.EventID)
		require.Equal(t, &ct.ID, r.ContactID)
		require.Equal(t, "ann@example.com", r.ContactEmail)
		require.Equal(t, store.RunRunning, r.Status)
		require.Nil(t, r.StartedAt, "started when its workflow loads it")
		require.Equal(t, 1, d.outbox(store.OutboxAutomationRun, id))
	}
	for _, a := range []store.Automation{off, elsewhere, foreign} {
		runs, _, err := d.st.Automations.ListAutomationRuns(d.ctx, a.TeamID, a.ID, nil, store.Page{Limit: 10})
		require.NoError(t, err)
		require.Empty(t, runs)
	}
	got, err := d.st.Automations.EventSendByID(d.ctx, ev.ID)
	require.NoError(t, err)
	require.Equal(t, "signed_up", got.Name)
	require.JSONEq(t, `{"plan":"pro"}`, string(got.Payload))

	// Running through both: no second run.
	_, res = d.send(team, ct.ID, "signed_up", `{}`)
	require.Empty(t, res.Started)

	// The first run ended: the contact may enter a1 again.
	require.NoError(t, d.st.Automations.FinishRun(d.ctx, want[0], store.RunCompleted, ""))
	ev3, res := d.send(team, ct.ID, "signed_up", `{}`)
	require.Equal(t, []uuid.UUID{store.AutomationRunID(a1.ID, ct.ID, ev3.ID)}, res.Started)

	// The run of a2 waits for "paid": a paid event wakes it (and starts
	// the automation it triggers).
	waiting := "paid"
	running, err := d.st.Automations.RecordStep(d.ctx, store.StepRecord{RunID: want[1], Key: "wait", Iteration: 1, Seq: 2,
		Type: "wait_for_event", Status: "waiting", WaitingEvent: &waiting})
	require.NoError(t, err)
	require.True(t, running)
	r := d.run(want[1])
	require.Equal(t, &waiting, r.WaitingEvent)
	require.NotNil(t, r.WaitingSince)
	paid, res := d.send(team, ct.ID, "paid", `{"amount":3}`)
	require.Equal(t, 1, res.Woken)
	require.Equal(t, []uuid.UUID{store.AutomationRunID(elsewhere.ID, ct.ID, paid.ID)}, res.Started)
	require.Equal(t, 1, d.outbox(store.OutboxAutomationWake, want[1]))
	since, err := d.st.Automations.EventsSince(d.ctx, want[1], "paid", nil, 10)
	require.NoError(t, err)
	require.Len(t, since, 1)
	require.Equal(t, paid.ID, since[0].ID)
	var more []uuid.UUID
	for range 3 {
		ev, _ := d.send(team, ct.ID, "paid", `{}`)
		more = append(more, ev.ID)
	}
	page, err := d.st.Automations.EventsSince(d.ctx, want[1], "paid", &since[0], 2)
	require.NoError(t, err)
	require.Equal(t, more[:2], []uuid.UUID{page[0].ID, page[1].ID}, "the page after the first, oldest first")
	page, err = d.st.Automations.EventsSince(d.ctx, want[1], "paid", &page[1], 2)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, more[2], page[0].ID)

	// Another contact's event, or another event, wakes nothing.
	ben := d.contact(team, "ben@example.com")
	_, res = d.send(team, ben.ID, "paid", `{}`)
	require.Zero(t, res.Woken)
	_, res = d.send(team, ct.ID, "signed_up", `{}`)
	require.Zero(t, res.Woken)
	require.Equal(t, 4, d.outbox(store.OutboxAutomationWake, want[1]), "one wake per paid event")

	// A contact that is gone: nothing is recorded.
	gone := uuid.Must(uuid.NewV7())
	_, err = d.st.Automations.SendEvent(d.ctx, store.EventSend{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "signed_up",
		ContactID: gone, Payload: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestAutomationSendEventConcurrentSendsStartOneRun: events sent at once
// for one contact start one run of an automation, not one each.
func TestAutomationSendEventConcurrentSendsStartOneRun(t *testing.T) {
	t.Parallel()
	d := newAutoDB(t)
	team := newTeam(t, d.st)
	a := d.automation(team, "clicked", store.AutomationEnabled)
	ct := d.contact(team, "ann@example.com")
	const n = 16
	var wg sync.WaitGroup
	started := make(chan []uuid.UUID, n)
	for range n {
		wg.Go(func() {
			res, err := d.st.Automations.SendEvent(d.ctx, store.EventSend{ID: uuid.Must(uuid.NewV7()), TeamID: team,
				Name: "clicked", ContactID: ct.ID, Payload: json.RawMessage(`{}`)})
			if err != nil {
				t.Errorf("sending: %v", err)
			}
			started <- res.Started
		})
	}
	wg.Wait()
	close(started)
	var all []uuid.UUID
	for s := range started {
		all = append(all, s...)
	}
	require.Len(t, all, 1, "one run per contact at a time")
	runs, _, err := d.st.Automations.ListAutomationRuns(d.ctx, team, a.ID, []string{store.RunRunning}, store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	var entries int
	require.NoError(t, d.db.QueryRow(d.ctx, `SELECT count(*) FROM outbox WHERE kind = $1`, store.OutboxAutomationRun).
		Scan(&entries))
	require.Equal(t, 1, entries)
}

// TestAutomationRecordSteps: steps recorded together are written in one
// transaction, in order: a completed step and the wait after it leave the
// run waiting for the wait's event; a final step after a wait ends the
// wait, and with an end the run ends with them. Steps of two runs are
// not recorded together.
func TestAutomationRecordSteps(t *testing.T) {
	t.Parallel()
	d, team, a, ct, run := newRunningRun(t)

	ev := "paid"
	trig := store.StepRecord{RunID: run, Key: "start", Iteration: 1, Seq: 1, Type: "trigger", Status: "completed"}
	wait := store.StepRecord{RunID: run, Key: "wait", Iteration: 1, Seq: 2, Type: "wait_for_event", Status: "waiting",
		WaitingEvent: &ev}
	running, err := d.st.Automations.RecordSteps(d.ctx, []store.StepRecord{trig, wait}, nil)
	require.NoError(t, err)
	require.True(t, running)
	r := d.run(run)
	require.Equal(t, &ev, r.WaitingEvent)
	require.NotNil(t, r.WaitingSince)

	wait.Status, wait.WaitingEvent = "completed", nil
	send := store.StepRecord{RunID: run, Key: "send", Iteration: 1, Seq: 3, Type: "send_email", Status: "completed"}
	running, err = d.st.Automations.RecordSteps(d.ctx, []store.StepRecord{wait, send},
		&store.RunEnd{Status: store.RunCompleted})
	require.NoError(t, err)
	require.True(t, running)
	r = d.run(run)
	require.Equal(t, store.RunCompleted, r.Status)
	require.NotNil(t, r.CompletedAt)
	require.Nil(t, r.WaitingEvent)
	require.Nil(t, r.WaitingSince)
	full, err := d.st.Automations.AutomationRun(d.ctx, team, a.ID, run)
	require.NoError(t, err)
	require.Len(t, full.Steps, 3)
	for _, s := range full.Steps {
		require.Equal(t, "completed", s.Status, s.Key)
	}

	_, other := d.send(team, ct.ID, "go", `{}`)
	_, err = d.st.Automations.RecordSteps(d.ctx, []store.StepRecord{
		{RunID: other.Started[0], Key: "start", Iteration: 1, Seq: 1, Type: "trigger", Status: "completed"}, send}, nil)
	require.ErrorContains(t, err, "recorded together")
	_, err = d.st.Automations.RecordSteps(d.ctx, nil, nil)
	require.Error(t, err)
}

// TestAutomationRecordStep: a step is recorded only while its run runs;
// a later state keeps the output when it has none and replaces the
// error; a final state ends the run's wait.
func TestAutomationRecordStep(t *testing.T) {
	t.Parallel()
	d, team, a, _, run := newRunningRun(t)

	ev := "later"
	rec := store.StepRecord{RunID: run, Key: "wait", Iteration: 1, Seq: 2, Type: "wait_for_event", Status: "waiting",
		Output: map[string]any{"n": 1}, Error: map[string]any{"message": "paused"}, WaitingEvent: &ev}
	running, err := d.st.Automations.RecordStep(d.ctx, rec)
	require.NoError(t, err)
	require.True(t, running)
	rec.Status, rec.Output, rec.Error, rec.WaitingEvent = "completed", nil, nil, nil
	_, err = d.st.Automations.RecordStep(d.ctx, rec)
	require.NoError(t, err)
	full, err := d.st.Automations.AutomationRun(d.ctx, team, a.ID, run)
	require.NoError(t, err)
	require.Len(t, full.Steps, 1)
	s := full.Steps[0]
	require.Equal(t, "completed", s.Status)
	require.JSONEq(t, `{"n":1}`, string(s.Output), "no output keeps the one recorded")
	require.Empty(t, s.Error, "no error clears it")
	require.NotNil(t, s.StartedAt)
	require.NotNil(t, s.CompletedAt)
	require.Nil(t, full.WaitingEvent)
	require.Nil(t, full.WaitingSince)

	// Another team reads nothing of it.
	other := newTeam(t, d.st)
	_, err = d.st.Automations.AutomationRun(d.ctx, other, a.ID, run)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = d.st.Automations.ListAutomationRuns(d.ctx, other, a.ID, nil, store.Page{Limit: 10})
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, d.st.Automations.FinishRun(d.ctx, run, store.RunFailed, "boom"))
	r := d.run(run)
	require.Equal(t, store.RunFailed, r.Status)
	require.Equal(t, "boom", *r.Error)
	require.NotNil(t, r.CompletedAt)
	running, err = d.st.Automations.RecordStep(d.ctx, store.StepRecord{RunID: run, Key: "x", Iteration: 1, Seq: 3,
		Type: "delay", Status: "waiting"})
	require.NoError(t, err)
	require.False(t, running)
	full, err = d.st.Automations.AutomationRun(d.ctx, team, a.ID, run)
	require.NoError(t, err)
	require.Len(t, full.Steps, 1, "a run that ended records nothing more")
	running, err = d.st.Automations.RecordStep(d.ctx, store.StepRecord{RunID: uuid.Must(uuid.NewV7()), Key: "x",
		Iteration: 1, Seq: 1, Type: "delay", Status: "waiting"})
	require.NoError(t, err)
	require.False(t, running, "nor does a run that is gone")
}

// TestAutomationRunsEndWithTheirContactOrAutomation: deleting a contact
// cancels its running runs, except the one whose contact_delete step is
// deleting it, and wakes them; stopping an automation cancels its
// running runs and wakes them; deleting it deletes its runs after waking
// them.
func TestAutomationRunsEndWithTheirContactOrAutomation(t *testing.T) {
	t.Parallel()
	d := newAutoDB(t)
	team := newTeam(t, d.st)
	a1 := d.automation(team, "go", store.AutomationEnabled)
	a2 := d.automation(team, "go", store.AutomationEnabled)
	ct := d.contact(team, "ann@example.com")
	_, res := d.send(team, ct.ID, "go", `{}`)
	deleter, bystander := res.Started[0], res.Started[1]
	done := d.run(deleter)
	require.Equal(t, a1.ID, done.AutomationID)
	_, err := d.st.Automations.RecordStep(d.ctx, store.StepRecord{RunID: deleter, Key: "forget", Iteration: 1, Seq: 2,
		Type: "contact_delete", Status: "running"})
	require.NoError(t, err)
	_, err = d.st.Audience.DeleteContact(d.ctx, team, store.ContactRef{ID: &ct.ID})
	require.NoError(t, err)
	r := d.run(deleter)
	require.Equal(t, store.RunRunning, r.Status)
	require.Nil(t, r.ContactID)
	require.Empty(t, r.ContactEmail)
	require.Zero(t, d.outbox(store.OutboxAutomationWake, deleter))
	r = d.run(bystander)
	require.Equal(t, store.RunCancelled, r.Status)
	require.Equal(t, "the contact was deleted", *r.Error)
	require.Equal(t, 1, d.outbox(store.OutboxAutomationWake, bystander))

	// Stop: a2's running runs are cancelled; runs already ended stay.
	ben, cy := d.contact(team, "ben@example.com"), d.contact(team, "cy@example.com")
	_, rb := d.send(team, ben.ID, "go", `{}`)
	_, rc := d.send(team, cy.ID, "go", `{}`)
	benRun, cyRun := store.AutomationRunID(a2.ID, ben.ID, d.run(rb.Started[1]).EventID), rc.Started[1]
	require.Equal(t, rb.Started[1], benRun)
	require.NoError(t, d.st.Automations.FinishRun(d.ctx, cyRun, store.RunCompleted, ""))
	disabled := store.AutomationDisabled
	got, err := d.st.Automations.UpdateAutomation(d.ctx, team, a2.ID, store.AutomationChange{Status: &disabled})
	require.NoError(t, err)
	require.Equal(t, store.AutomationDisabled, got.Status)
	require.Equal(t, 1, got.Version, "a change of status is no new version")
	r = d.run(benRun)
	require.Equal(t, store.RunCancelled, r.Status)
	require.Equal(t, "the automation was stopped", *r.Error)
	require.Equal(t, 1, d.outbox(store.OutboxAutomationWake, benRun))
	require.Equal(t, store.RunCompleted, d.run(cyRun).Status)
	require.Zero(t, d.outbox(store.OutboxAutomationWake, cyRun))
	require.Equal(t, map[string]int{store.RunCancelled: 2, store.RunCompleted: 1}, got.Runs)

	// Delete a1: its running runs are woken, then gone with it.
	benA1 := rb.Started[0]
	require.NoError(t, d.st.Automations.DeleteAutomation(d.ctx, team, a1.ID))
	require.Equal(t, 1, d.outbox(store.OutboxAutomationWake, benA1))
	require.Equal(t, 1, d.outbox(store.OutboxAutomationWake, deleter))
	_, err = d.st.Automations.Run(d.ctx, benA1)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = d.st.Automations.RunPlan(d.ctx, benA1, false)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = d.st.Automations.AutomationByID(d.ctx, team, a1.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, d.st.Automations.DeleteAutomation(d.ctx, team, a1.ID), store.ErrNotFound)
}

// TestAutomationVersionsAndRunList: a new definition is a new version
// that new runs start with while older runs keep theirs; runs list
// newest first, by status, and page.
func TestAutomationVersionsAndRunList(t *testing.T) {
	t.Parallel()
	d := newAutoDB(t)
	team := newTeam(t, d.st)
	a := d.automation(team, "go", store.AutomationEnabled)
	first := d.contact(team, "first@example.com")
	_, res := d.send(team, first.ID, "go", `{}`)
	old := res.Started[0]

	went := "went"
	got, err := d.st.Automations.UpdateAutomation(d.ctx, team, a.ID, store.AutomationChange{
		Definition: autoDefinition(went), EventName: &went})
	require.NoError(t, err)
	require.Equal(t, 2, got.Version)
	require.Equal(t, "went", got.EventName)
	require.JSONEq(t, string(autoDefinition("went")), string(got.Definition))
	r, def, err := d.st.Automations.RunPlan(d.ctx, old, true)
	require.NoError(t, err)
	require.Equal(t, 1, r.Version)
	require.NotNil(t, r.StartedAt)
	require.JSONEq(t, string(autoDefinition("go")), string(def), "the run keeps the version it started with")

	_, res = d.send(team, first.ID, "go", `{}`)
	require.Empty(t, res.Started, "the trigger changed")
	var ids []uuid.UUID
	for i := range 5 {
		ct := d.contact(team, "c"+string(rune('a'+i))+"@example.com")
		_, res := d.send(team, ct.ID, "went", `{}`)
		require.Len(t, res.Started, 1)
		require.Equal(t, 2, d.run(res.Started[0]).Version)
		ids = append(ids, res.Started[0])
		time.Sleep(2 * time.Millisecond) // distinct event times
	}
	require.NoError(t, d.st.Automations.FinishRun(d.ctx, ids[1], store.RunCompleted, ""))
	require.NoError(t, d.st.Automations.FinishRun(d.ctx, ids[3], store.RunFailed, "x"))

	all := append([]uuid.UUID{old}, ids...)
	slices.Reverse(all)
	var listed []uuid.UUID
	p := store.Page{Limit: 2}
	for {
		page, more, err := d.st.Automations.ListAutomationRuns(d.ctx, team, a.ID, nil, p)
		require.NoError(t, err)
		for _, r := range page {
			listed = append(listed, r.ID)
		}
		if !more {
			break
		}
		last := page[len(page)-1].ID
		p = store.Page{Limit: 2, After: &last}
	}
	require.Equal(t, all, listed, "newest first, every run once")

	ended, _, err := d.st.Automations.ListAutomationRuns(d.ctx, team, a.ID,
		[]string{store.RunCompleted, store.RunFailed}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ids[3], ids[1]}, []uuid.UUID{ended[0].ID, ended[1].ID})
	require.Len(t, ended, 2)
	withCounts, err := d.st.Automations.AutomationByID(d.ctx, team, a.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]int{store.RunRunning: 4, store.RunCompleted: 1, store.RunFailed: 1}, withCounts.Runs)
}

// TestAutomationEventDefinitions: names are unique per team, found by id
// or name, and another team's are not found.
func TestAutomationEventDefinitions(t *testing.T) {
	t.Parallel()
	d := newAutoDB(t)
	team, other := newTeam(t, d.st), newTeam(t, d.st)
	e, err := d.st.Automations.CreateEventDefinition(d.ctx, store.EventDefinition{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Name: "user.signed_up", Schema: map[string]string{"plan": "string"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"plan": "string"}, e.Schema)
	_, err = d.st.Automations.CreateEventDefinition(d.ctx, store.EventDefinition{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Name: "user.signed_up"})
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = d.st.Automations.CreateEventDefinition(d.ctx, store.EventDefinition{ID: uuid.Must(uuid.NewV7()), TeamID: other,
		Name: "user.signed_up"})
	require.NoError(t, err, "another team may use the name")

	for _, ref := range []string{"user.signed_up", e.ID.String()} {
		got, err := d.st.Automations.EventDefinition(d.ctx, team, ref)
		require.NoError(t, err)
		require.Equal(t, e.ID, got.ID)
	}
	upd, err := d.st.Automations.UpdateEventDefinition(d.ctx, team, e.ID.String(), nil)
	require.NoError(t, err)
	require.Nil(t, upd.Schema)
	require.NotNil(t, upd.UpdatedAt)
	_, err = d.st.Automations.EventDefinition(d.ctx, other, e.ID.String())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = d.st.Automations.UpdateEventDefinition(d.ctx, other, e.ID.String(), nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = d.st.Automations.DeleteEventDefinition(d.ctx, other, e.ID.String())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = d.st.Automations.EventDefinition(d.ctx, team, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	list, _, err := d.st.Automations.ListEventDefinitions(d.ctx, team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = d.st.Automations.DeleteEventDefinition(d.ctx, team, "user.signed_up")
	require.NoError(t, err)
	_, err = d.st.Automations.EventDefinition(d.ctx, team, e.ID.String())
	require.ErrorIs(t, err, store.ErrNotFound)
}
