package automations_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/workflows/automation"
	"github.com/posthaste/posthaste/workflows/contract"
)

// requireInvalid asserts an *invalid.Error about field.
func requireInvalid(t *testing.T, err error, field string) *invalid.Error {
	t.Helper()
	var ie *invalid.Error
	require.True(t, errors.As(err, &ie), "want an *invalid.Error about %s, got %v", field, err)
	require.Equal(t, field, ie.Field, ie.Message)
	return ie
}

func ptr[T any](v T) *T { return &v }

// connections reads connections written as JSON.
func connections(t *testing.T, js string) []automation.Connection {
	t.Helper()
	_, c := graph(t, `[]`, js)
	return c
}

// triggerOnly is an automation of one trigger.
func triggerOnly(event string) string {
	return `[{"key":"start","type":"trigger","config":{"event_name":"` + event + `"}}]`
}

// TestSendEventStartsRuns: an event send starts one run per enabled
// automation it triggers, none of a disabled one and none of one the
// contact is running through (it may enter again once that run ended);
// each run's id is store.AutomationRunID of its automation, contact and
// event, and an automation_run outbox entry starts its workflow. The
// contact's runs waiting for the event get an automation_wake entry.
func TestSendEventStartsRuns(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	a1 := e.automation(tm.ID, true, triggerOnly("user.signed_up"), `[]`)
	a2 := e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"user.signed_up"}},
		{"key":"wait","type":"wait_for_event","config":{"event_name":"user.verified"}}]`,
		`[{"from":"start","to":"wait"}]`)
	off := e.automation(tm.ID, false, triggerOnly("user.signed_up"), `[]`)
	require.Equal(t, store.AutomationDisabled, off.Status)
	ann := e.contact(tm.ID, "delivered+ann@posthaste.test", "Ann", nil)

	sent := e.send(tm.ID, "user.signed_up", ann.ID, `{"plan":"pro"}`)
	require.Equal(t, "user.signed_up", sent.Event)
	require.Equal(t, ann.ID, sent.ContactID)
	want := []uuid.UUID{store.AutomationRunID(a1.ID, ann.ID, sent.ID), store.AutomationRunID(a2.ID, ann.ID, sent.ID)}
	require.ElementsMatch(t, want, sent.Runs)
	for _, id := range want {
		require.Equal(t, 1, e.outbox(store.OutboxAutomationRun, id), "the run's workflow is started through the outbox")
		r := e.run(id)
		require.Equal(t, store.RunRunning, r.Status)
		require.Equal(t, sent.ID, r.EventID)
	}
	runs, _, err := e.svc.Runs(e.ctx, tm.ID, off.ID, nil, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, runs, "a disabled automation starts nothing")

	// The contact is in both: a second event starts nothing.
	again := e.send(tm.ID, "user.signed_up", ann.ID, "")
	require.Empty(t, again.Runs)

	// a2's run waits for user.verified: sending it wakes the run.
	waitRun := store.AutomationRunID(a2.ID, ann.ID, sent.ID)
	require.Equal(t, defaultOutcome, e.step(waitRun, "start", 1, 1, contract.PhaseRun))
	require.Equal(t, nothingYet, e.step(waitRun, "wait", 1, 2, contract.PhaseWait))
	require.Zero(t, e.outbox(store.OutboxAutomationWake, waitRun))
	verified := e.send(tm.ID, "user.verified", ann.ID, "")
	require.Empty(t, verified.Runs)
	require.Equal(t, 1, e.outbox(store.OutboxAutomationWake, waitRun))
	require.Zero(t, e.outbox(store.OutboxAutomationWake, want[0]), "a run that does not wait is not woken")

	// a1's run ended: the contact enters a1 again, not a2.
	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: want[0],
		Status: contract.RunCompleted}))
	third := e.send(tm.ID, "user.signed_up", ann.ID, "")
	require.Equal(t, []uuid.UUID{store.AutomationRunID(a1.ID, ann.ID, third.ID)}, third.Runs)
	require.Equal(t, 1, e.outbox(store.OutboxAutomationRun, third.Runs[0]))

	list, _, err := e.svc.Runs(e.ctx, tm.ID, a1.ID, nil, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, third.Runs[0], list[0].ID, "newest first")
	list, _, err = e.svc.Runs(e.ctx, tm.ID, a1.ID, []string{store.RunCompleted}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, want[0], list[0].ID)
	_, _, err = e.svc.Runs(e.ctx, tm.ID, a1.ID, []string{"done"}, store.Page{Limit: 10})
	requireInvalid(t, err, "status")
	got, err := e.svc.Get(e.ctx, tm.ID, a1.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]int{store.RunRunning: 1, store.RunCompleted: 1}, got.Runs)
}

// TestSendEventInput: the event, the contact and the payload are checked
// (against the event's schema when it has one); an address that is no
// contact yet becomes one.
func TestSendEventInput(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	e.automation(tm.ID, true, triggerOnly("order.paid"), `[]`)
	_, err := e.svc.CreateEvent(e.ctx, tm.ID, automations.EventInput{Name: ptr("order.paid"),
		Schema: json.RawMessage(`{"amount":"number","at":"date","vip":"boolean"}`)})
	require.NoError(t, err)
	ann := e.contact(tm.ID, "delivered+ann@posthaste.test", "", nil)
	id := ann.ID.String()

	for _, tc := range []struct {
		name  string
		in    automations.SendInput
		field string
	}{
		{"no event", automations.SendInput{ContactID: &id}, "event"},
		{"reserved event", automations.SendInput{Event: "resend:x", ContactID: &id}, "event"},
		{"no contact", automations.SendInput{Event: "order.paid"}, "contact_id"},
		{"both contact and email", automations.SendInput{Event: "order.paid", ContactID: &id, Email: ptr("a@b.test")},
			"contact_id"},
		{"bad contact id", automations.SendInput{Event: "order.paid", ContactID: ptr("nope")}, "contact_id"},
		{"unknown contact", automations.SendInput{Event: "order.paid", ContactID: ptr(uuid.NewString())}, "contact_id"},
		{"payload not an object", automations.SendInput{Event: "order.paid", ContactID: &id,
			Payload: json.RawMessage(`[1]`)}, "payload"},
		{"number as string", automations.SendInput{Event: "order.paid", ContactID: &id,
			Payload: json.RawMessage(`{"amount":"3"}`)}, "payload"},
		{"bad date", automations.SendInput{Event: "order.paid", ContactID: &id,
			Payload: json.RawMessage(`{"at":"yesterday"}`)}, "payload"},
	} {
		_, err := e.svc.SendEvent(e.ctx, tm.ID, tc.in)
		requireInvalid(t, err, tc.field)
	}
	autos, _, err := e.svc.List(e.ctx, tm.ID, "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, autos, 1)
	require.Empty(t, autos[0].Runs, "no refused send started a run")

	sent, err := e.svc.SendEvent(e.ctx, tm.ID, automations.SendInput{Event: "order.paid", ContactID: &id,
		Payload: json.RawMessage(`{"amount":3,"at":"2026-01-02","vip":true,"extra":"x"}`)})
	require.NoError(t, err)
	require.Len(t, sent.Runs, 1)
	ev, err := e.st.Automations.EventSendByID(e.ctx, sent.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"amount":3,"at":"2026-01-02","vip":true,"extra":"x"}`, string(ev.Payload))

	// By address: a new contact.
	sent, err = e.svc.SendEvent(e.ctx, tm.ID, automations.SendInput{Event: "order.paid", Email: ptr("New@Example.com")})
	require.NoError(t, err)
	ct, err := e.st.Audience.Contact(e.ctx, tm.ID, store.ContactRef{Email: "new@example.com"})
	require.NoError(t, err)
	require.Equal(t, ct.ID, sent.ContactID)
	require.Equal(t, []uuid.UUID{store.AutomationRunID(e.run(sent.Runs[0]).AutomationID, ct.ID, sent.ID)}, sent.Runs)
	// By the address of a contact: the same contact.
	byAddr, err := e.svc.SendEvent(e.ctx, tm.ID, automations.SendInput{Event: "order.paid", Email: ptr(ann.Email)})
	require.NoError(t, err)
	require.Equal(t, ann.ID, byAddr.ContactID)
	require.Empty(t, byAddr.Runs, "ann is still running through it")

	// An event without a definition is accepted with any payload.
	free, err := e.svc.SendEvent(e.ctx, tm.ID, automations.SendInput{Event: "anything", ContactID: &id,
		Payload: json.RawMessage(`{"amount":"x"}`)})
	require.NoError(t, err)
	require.Empty(t, free.Runs)
}

// TestEventDefinitionService: event definitions are named once per
// team, their names and schemas checked.
func TestEventDefinitionService(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	_, err := e.svc.CreateEvent(e.ctx, tm.ID, automations.EventInput{})
	require.True(t, requireInvalid(t, err, "name").Missing)
	_, err = e.svc.CreateEvent(e.ctx, tm.ID, automations.EventInput{Name: ptr("resend:email.sent")})
	requireInvalid(t, err, "name")
	_, err = e.svc.CreateEvent(e.ctx, tm.ID, automations.EventInput{Name: ptr("x"), Schema: json.RawMessage(`{"a":"int"}`)})
	requireInvalid(t, err, "schema")
	ev, err := e.svc.CreateEvent(e.ctx, tm.ID, automations.EventInput{Name: ptr("user.signed_up"),
		Schema: json.RawMessage(`{"plan":"string"}`)})
	require.NoError(t, err)
	_, err = e.svc.CreateEvent(e.ctx, tm.ID, automations.EventInput{Name: ptr("user.signed_up")})
	requireInvalid(t, err, "name")
	got, err := e.svc.Event(e.ctx, tm.ID, "user.signed_up")
	require.NoError(t, err)
	require.Equal(t, ev.ID, got.ID)
	upd, err := e.svc.UpdateEvent(e.ctx, tm.ID, ev.ID.String(), automations.EventInput{Schema: json.RawMessage(`null`)})
	require.NoError(t, err)
	require.Nil(t, upd.Schema)
	list, _, err := e.svc.ListEvents(e.ctx, tm.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = e.svc.DeleteEvent(e.ctx, tm.ID, "user.signed_up")
	require.NoError(t, err)
	_, err = e.svc.Event(e.ctx, tm.ID, ev.ID.String())
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestAutomationStopCancelsRuns: a stop disables the automation, cancels
// its running runs (waking their workflows) and starts no more; enabled
// again, events start it again.
func TestAutomationStopCancelsRuns(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	a := e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"go"}},
		{"key":"wait","type":"delay","config":{"duration":"1 day"}}]`, `[{"from":"start","to":"wait"}]`)
	ann := e.contact(tm.ID, "delivered+ann@posthaste.test", "", nil)
	ben := e.contact(tm.ID, "delivered+ben@posthaste.test", "", nil)
	_, annRun := e.onlyRun(tm.ID, "go", ann.ID, "")
	_, benRun := e.onlyRun(tm.ID, "go", ben.ID, "")
	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: benRun,
		Status: contract.RunCompleted}))
	require.Equal(t, nothingYet, e.step(annRun, "wait", 1, 2, contract.PhaseWait))

	stopped, err := e.svc.Stop(e.ctx, tm.ID, a.ID)
	require.NoError(t, err)
	require.Equal(t, store.AutomationDisabled, stopped.Status)
	require.Equal(t, 1, stopped.Version)
	r := e.run(annRun)
	require.Equal(t, store.RunCancelled, r.Status)
	require.NotNil(t, r.Error)
	require.NotNil(t, r.CompletedAt)
	require.Equal(t, 1, e.outbox(store.OutboxAutomationWake, annRun), "the cancelled run's workflow is woken")
	require.Equal(t, store.RunCompleted, e.run(benRun).Status, "an ended run stays as it ended")
	require.Zero(t, e.outbox(store.OutboxAutomationWake, benRun))
	require.Equal(t, cancelled, e.step(annRun, "wait", 1, 2, contract.PhaseWait), "the woken workflow ends")
	require.Equal(t, cancelled, e.stepOutcome(annRun, "wait", 1, 2, contract.PhaseDone, "default"))
	require.Equal(t, "waiting", e.mustStep(annRun, "wait", 1).Status, "nothing is written after the stop")
	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: annRun,
		Status: contract.RunCompleted}))
	require.Equal(t, store.RunCancelled, e.run(annRun).Status)

	require.Empty(t, e.send(tm.ID, "go", ann.ID, "").Runs, "a stopped automation starts nothing")
	enabled := store.AutomationEnabled
	_, err = e.svc.Update(e.ctx, tm.ID, a.ID, automations.AutomationInput{Status: &enabled})
	require.NoError(t, err)
	require.Len(t, e.send(tm.ID, "go", ann.ID, "").Runs, 1, "enabled again, it starts runs")
}

// TestAutomationUpdateKeepsRunVersions: new steps are a new version that
// new runs start with, while a run in flight keeps the version it
// started with; a rename is no new version; a definition is validated
// as a graph and its references checked. Duplicate copies the current
// version into a disabled automation.
func TestAutomationUpdateKeepsRunVersions(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	a := e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"go"}},
		{"key":"wait","type":"delay","config":{"duration":"1 hour"}}]`, `[{"from":"start","to":"wait"}]`)
	require.Equal(t, 1, a.Version)
	require.Equal(t, "go", a.EventName)
	ann := e.contact(tm.ID, "delivered+ann@posthaste.test", "", nil)
	_, old := e.onlyRun(tm.ID, "go", ann.ID, "")

	steps, conns := graph(t, `[
		{"key":"start","type":"trigger","config":{"event_name":"go"}},
		`+sendEmailStep("mail", tm.Template, `{}`)+`,
		{"key":"wait","type":"delay","config":{"duration":"2 hours"}}]`,
		`[{"from":"start","to":"mail"},{"from":"mail","to":"wait"}]`)
	v2, err := e.svc.Update(e.ctx, tm.ID, a.ID, automations.AutomationInput{Steps: steps, Connections: conns,
		HasSteps: true, HasConnections: true})
	require.NoError(t, err)
	require.Equal(t, 2, v2.Version)
	require.Equal(t, store.AutomationEnabled, v2.Status)

	plan, err := e.acts.LoadAutomationRun(e.ctx, contract.AutomationRunRef{RunID: old})
	require.NoError(t, err)
	require.Equal(t, 1, plan.Version, "the run keeps the version it started with")
	require.Len(t, plan.Definition.Steps, 2)
	_, ok := plan.Definition.Step("mail")
	require.False(t, ok)
	res := e.step(old, "mail", 1, 2, contract.PhaseRun)
	require.Equal(t, `the step "mail" does not exist`, res.Error, "version 1 has no such step")

	ben := e.contact(tm.ID, "delivered+ben@posthaste.test", "", nil)
	_, fresh := e.onlyRun(tm.ID, "go", ben.ID, "")
	plan, err = e.acts.LoadAutomationRun(e.ctx, contract.AutomationRunRef{RunID: fresh})
	require.NoError(t, err)
	require.Equal(t, 2, plan.Version)
	require.Len(t, plan.Definition.Steps, 3)

	name := "Renamed"
	renamed, err := e.svc.Update(e.ctx, tm.ID, a.ID, automations.AutomationInput{Name: &name})
	require.NoError(t, err)
	require.Equal(t, "Renamed", renamed.Name)
	require.Equal(t, 2, renamed.Version, "a rename keeps the version")

	// Only the connections: a new version with the current steps.
	v3, err := e.svc.Update(e.ctx, tm.ID, a.ID, automations.AutomationInput{Connections: conns[:1], HasConnections: true})
	require.Error(t, err, "wait is no longer reachable")
	requireInvalid(t, err, "steps")
	require.Equal(t, store.Automation{}, v3)

	// The trigger's event changes with the steps.
	steps2, _ := graph(t, triggerOnly("went"), `[]`)
	v3, err = e.svc.Update(e.ctx, tm.ID, a.ID, automations.AutomationInput{Steps: steps2, HasSteps: true,
		Connections: []automation.Connection{}, HasConnections: true})
	require.NoError(t, err)
	require.Equal(t, 3, v3.Version)
	require.Equal(t, "went", v3.EventName)
	require.Empty(t, e.send(tm.ID, "go", e.contact(tm.ID, "delivered+cy@posthaste.test", "", nil).ID, "").Runs)

	// References are checked: a template that is a draft, a segment of
	// nobody.
	draftName, html := "Draft", "<p>x</p>"
	draft, err := e.tpls.Create(e.ctx, tm.ID, templates.Edit{Name: &draftName, HTML: &html})
	require.NoError(t, err)
	bad, _ := graph(t, `[{"key":"start","type":"trigger","config":{"event_name":"go"}},`+
		sendEmailStep("mail", draft, `{}`)+`]`, `[]`)
	_, err = e.svc.Update(e.ctx, tm.ID, a.ID, automations.AutomationInput{Steps: bad, HasSteps: true,
		Connections: connections(t, `[{"from":"start","to":"mail"}]`), HasConnections: true})
	require.Contains(t, requireInvalid(t, err, "steps").Message, "no published template")
	bad, _ = graph(t, `[{"key":"start","type":"trigger","config":{"event_name":"go"}},
		{"key":"add","type":"add_to_segment","config":{"segment_id":"`+uuid.NewString()+`"}}]`, `[]`)
	_, err = e.svc.Update(e.ctx, tm.ID, a.ID, automations.AutomationInput{Steps: bad, HasSteps: true,
		Connections: connections(t, `[{"from":"start","to":"add"}]`), HasConnections: true})
	require.Contains(t, requireInvalid(t, err, "steps").Message, "no segment")
	cur, err := e.svc.Get(e.ctx, tm.ID, a.ID)
	require.NoError(t, err)
	require.Equal(t, 3, cur.Version, "a refused update stores nothing")

	dup, err := e.svc.Duplicate(e.ctx, tm.ID, a.ID)
	require.NoError(t, err)
	require.NotEqual(t, a.ID, dup.ID)
	require.Equal(t, "Renamed (copy)", dup.Name)
	require.Equal(t, store.AutomationDisabled, dup.Status)
	require.Equal(t, 1, dup.Version)
	require.Equal(t, "went", dup.EventName)
	require.JSONEq(t, string(cur.Definition), string(dup.Definition))
}

// TestAutomationTenantIsolation: another team can neither read nor
// change a team's events, automations and runs, nor start them.
func TestAutomationTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	a, b := e.team(), e.team()
	ev, err := e.svc.CreateEvent(e.ctx, a.ID, automations.EventInput{Name: ptr("user.signed_up")})
	require.NoError(t, err)
	auto := e.automation(a.ID, true, triggerOnly("user.signed_up"), `[]`)
	ann := e.contact(a.ID, "delivered+ann@posthaste.test", "", nil)
	_, run := e.onlyRun(a.ID, "user.signed_up", ann.ID, "")

	for _, ref := range []string{ev.ID.String(), ev.Name} {
		_, err = e.svc.Event(e.ctx, b.ID, ref)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = e.svc.UpdateEvent(e.ctx, b.ID, ref, automations.EventInput{})
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = e.svc.DeleteEvent(e.ctx, b.ID, ref)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	list, _, err := e.svc.ListEvents(e.ctx, b.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)

	_, err = e.svc.Get(e.ctx, b.ID, auto.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	name := "mine"
	_, err = e.svc.Update(e.ctx, b.ID, auto.ID, automations.AutomationInput{Name: &name})
	require.ErrorIs(t, err, store.ErrNotFound)
	steps, _ := graph(t, triggerOnly("x"), `[]`)
	_, err = e.svc.Update(e.ctx, b.ID, auto.ID, automations.AutomationInput{Steps: steps, HasSteps: true})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.svc.Stop(e.ctx, b.ID, auto.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.svc.Duplicate(e.ctx, b.ID, auto.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, e.svc.Delete(e.ctx, b.ID, auto.ID), store.ErrNotFound)
	_, _, err = e.svc.Runs(e.ctx, b.ID, auto.ID, nil, store.Page{Limit: 10})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.svc.Run(e.ctx, b.ID, auto.ID, run)
	require.ErrorIs(t, err, store.ErrNotFound)
	autos, _, err := e.svc.List(e.ctx, b.ID, "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, autos)

	// Team B's event, even for A's contact's id or address, starts none
	// of A's automations.
	id := ann.ID.String()
	_, err = e.svc.SendEvent(e.ctx, b.ID, automations.SendInput{Event: "user.signed_up", ContactID: &id})
	requireInvalid(t, err, "contact_id")
	other, err := e.svc.SendEvent(e.ctx, b.ID, automations.SendInput{Event: "user.signed_up", Email: ptr(ann.Email)})
	require.NoError(t, err)
	require.NotEqual(t, ann.ID, other.ContactID, "B's contact of that address is B's own")
	require.Empty(t, other.Runs)

	// Nothing changed for A.
	got, err := e.svc.Get(e.ctx, a.ID, auto.ID)
	require.NoError(t, err)
	require.Equal(t, store.AutomationEnabled, got.Status)
	require.Equal(t, 1, got.Version)
	full, err := e.svc.Run(e.ctx, a.ID, auto.ID, run)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, full.Status)
	_, err = e.svc.Event(e.ctx, a.ID, ev.ID.String())
	require.NoError(t, err)
	// A's run, asked for under another automation of A, is not found.
	other2 := e.automation(a.ID, false, triggerOnly("x"), `[]`)
	_, err = e.svc.Run(e.ctx, a.ID, other2.ID, run)
	require.ErrorIs(t, err, store.ErrNotFound)
}
