package automations_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/automation"
	"github.com/posthaste/posthaste/workflows/contract"
)

var (
	defaultOutcome = contract.AutomationStepResult{Outcome: automation.Default}
	nothingYet     = contract.AutomationStepResult{}
	cancelled      = contract.AutomationStepResult{Cancelled: true}
)

// TestRunAutomationStepTriggerAndSendEmail walks a run as its workflow
// would: the load marks it started, the trigger records the event that
// started it, and the send_email step accepts exactly one email per
// visit, rendered with the event's payload and the contact's name; a
// retried visit sends nothing new and records the same email, a second
// visit sends a second one.
func TestRunAutomationStepTriggerAndSendEmail(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	ann := e.contact(tm.ID, "delivered+ann@posthaste.test", "Ann", nil)
	a := e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"user.signed_up"}},
		`+sendEmailStep("welcome", tm.Template, `{"PLAN":{"var":"event.plan"},"NAME":{"var":"contact.first_name"}}`)+`]`,
		`[{"from":"start","to":"welcome"}]`)
	sent, run := e.onlyRun(tm.ID, "user.signed_up", ann.ID, `{"plan":"pro"}`)

	plan, err := e.acts.LoadAutomationRun(e.ctx, contract.AutomationRunRef{RunID: run})
	require.NoError(t, err)
	require.Equal(t, contract.RunRunning, plan.Status)
	require.Equal(t, tm.ID, plan.TeamID)
	require.Equal(t, a.ID, plan.AutomationID)
	require.Equal(t, 1, plan.Version)
	require.Len(t, plan.Definition.Steps, 2)
	require.Equal(t, "user.signed_up", plan.Definition.EventName())
	require.NotNil(t, e.run(run).StartedAt, "loading the run marks it started")

	require.Equal(t, defaultOutcome, e.step(run, "start", 1, 1, contract.PhaseRun))
	trig := e.mustStep(run, "start", 1)
	require.Equal(t, "completed", trig.Status)
	require.Equal(t, automation.Trigger, trig.Type)
	require.Equal(t, 1, trig.Seq)
	require.Equal(t, sent.ID.String(), output(t, trig)["event_id"])
	require.NotNil(t, trig.CompletedAt)

	require.Equal(t, defaultOutcome, e.step(run, "welcome", 1, 2, contract.PhaseRun))
	first := e.mustStep(run, "welcome", 1)
	require.Equal(t, "completed", first.Status)
	require.Equal(t, automation.SendEmail, first.Type)
	emailID, ok := output(t, first)["email_id"].(string)
	require.True(t, ok, "the step records its email: %s", first.Output)
	email, err := e.st.Emails.GetEmail(e.ctx, tm.ID, uuid.MustParse(emailID))
	require.NoError(t, err)
	require.Equal(t, "Welcome Ann", email.Subject, "{\"var\":\"contact.first_name\"} is the contact's name")
	require.NotNil(t, email.HTML)
	require.Contains(t, *email.HTML, "Plan pro for Ann, ref none", "{\"var\":\"event.plan\"} is the payload's plan")
	require.Equal(t, 1, e.emailsTo(tm.ID, ann.Email))

	// The workflow retries the same visit (its activity timed out, say).
	require.Equal(t, defaultOutcome, e.step(run, "welcome", 1, 2, contract.PhaseRun))
	require.Equal(t, emailID, output(t, e.mustStep(run, "welcome", 1))["email_id"], "the retry answers the same email")
	require.Equal(t, 1, e.emailsTo(tm.ID, ann.Email), "the retry sends nothing new")

	// A loop visits the step again: a new email.
	require.Equal(t, defaultOutcome, e.step(run, "welcome", 2, 3, contract.PhaseRun))
	second, ok := output(t, e.mustStep(run, "welcome", 2))["email_id"].(string)
	require.True(t, ok)
	require.NotEqual(t, emailID, second)
	require.Equal(t, 2, e.emailsTo(tm.ID, ann.Email))

	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: run,
		Status: contract.RunCompleted}))
	r := e.run(run)
	require.Equal(t, store.RunCompleted, r.Status)
	require.NotNil(t, r.CompletedAt)
	require.Nil(t, r.Error)
	var keys []string
	for _, s := range r.Steps {
		keys = append(keys, s.Key)
	}
	require.Equal(t, []string{"start", "welcome", "welcome"}, keys, "steps in the order taken")

	// A finished run is left as it is, and its steps are not written.
	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: run,
		Status: contract.RunFailed, Error: "late"}))
	require.Equal(t, store.RunCompleted, e.run(run).Status)
	require.Equal(t, cancelled, e.step(run, "welcome", 3, 4, contract.PhaseRun))
	require.Equal(t, 2, e.emailsTo(tm.ID, ann.Email))
}

// TestRunAutomationStepWaitForEvent: the wait phase records the step
// waiting and the event the run awaits; an event of that name sent before
// the wait began does not count, one whose payload does not meet the
// filter rule is passed over, and the next that does completes the step
// with its id (event_received); its payload is then
// wait_events.<name>.<field> for the steps after. A wait that runs out is
// recorded timed out.
func TestRunAutomationStepWaitForEvent(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	bob := e.contact(tm.ID, "delivered+bob@posthaste.test", "", nil)
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"order.created"}},
		{"key":"paid","type":"wait_for_event","config":{"event_name":"order.paid","timeout":"1 day",
			"filter_rule":{"type":"rule","field":"event.amount","operator":"gte","value":100}}},
		`+sendEmailStep("receipt", tm.Template, `{"PLAN":{"var":"event.plan"},"REF":{"var":"wait_events.order.paid.ref"}}`)+`]`,
		`[{"from":"start","to":"paid"},{"from":"paid","to":"receipt","type":"event_received"}]`)
	_, run := e.onlyRun(tm.ID, "order.created", bob.ID, `{"plan":"gold"}`)
	require.Equal(t, defaultOutcome, e.step(run, "start", 1, 1, contract.PhaseRun))

	// Paid before the run reached its wait: it does not count.
	early := e.send(tm.ID, "order.paid", bob.ID, `{"amount":500,"ref":"early"}`)
	require.Empty(t, early.Runs)
	require.Zero(t, e.outbox(store.OutboxAutomationWake, run), "the run did not wait yet")

	require.Equal(t, nothingYet, e.step(run, "paid", 1, 2, contract.PhaseWait))
	w := e.mustStep(run, "paid", 1)
	require.Equal(t, "waiting", w.Status)
	require.Equal(t, automation.WaitForEvent, w.Type)
	require.Nil(t, w.CompletedAt)
	r := e.run(run)
	require.NotNil(t, r.WaitingEvent)
	require.Equal(t, "order.paid", *r.WaitingEvent)
	require.NotNil(t, r.WaitingSince)
	require.Equal(t, nothingYet, e.step(run, "paid", 1, 2, contract.PhaseCheck), "the early event does not count")

	// Paid too little: woken, but the filter rule passes it over.
	e.send(tm.ID, "order.paid", bob.ID, `{"amount":50,"ref":"small"}`)
	require.Equal(t, 1, e.outbox(store.OutboxAutomationWake, run), "an event the run waits for wakes it")
	require.Equal(t, nothingYet, e.step(run, "paid", 1, 2, contract.PhaseCheck))
	require.Equal(t, "waiting", e.mustStep(run, "paid", 1).Status)

	// Another event of the contact does not wake it.
	e.send(tm.ID, "order.shipped", bob.ID, `{}`)
	require.Equal(t, 1, e.outbox(store.OutboxAutomationWake, run))

	big := e.send(tm.ID, "order.paid", bob.ID, `{"amount":150,"ref":"R-42"}`)
	require.Equal(t, 2, e.outbox(store.OutboxAutomationWake, run))
	require.Equal(t, contract.AutomationStepResult{Outcome: automation.EventReceived},
		e.step(run, "paid", 1, 2, contract.PhaseCheck))
	w = e.mustStep(run, "paid", 1)
	require.Equal(t, "completed", w.Status)
	require.NotNil(t, w.CompletedAt)
	require.Equal(t, big.ID.String(), output(t, w)["event_id"])
	r = e.run(run)
	require.Nil(t, r.WaitingEvent, "the run no longer waits")
	require.Nil(t, r.WaitingSince)

	require.Equal(t, defaultOutcome, e.step(run, "receipt", 1, 3, contract.PhaseRun))
	emailID, ok := output(t, e.mustStep(run, "receipt", 1))["email_id"].(string)
	require.True(t, ok)
	email, err := e.st.Emails.GetEmail(e.ctx, tm.ID, uuid.MustParse(emailID))
	require.NoError(t, err)
	require.Contains(t, *email.HTML, "Plan gold for friend, ref R-42",
		"the waited-for event's payload fills wait_events.order.paid.ref")

	// Another contact's wait runs out.
	cy := e.contact(tm.ID, "delivered+cy@posthaste.test", "", nil)
	_, run2 := e.onlyRun(tm.ID, "order.created", cy.ID, `{}`)
	require.Equal(t, defaultOutcome, e.step(run2, "start", 1, 1, contract.PhaseRun))
	require.Equal(t, nothingYet, e.step(run2, "paid", 1, 2, contract.PhaseWait))
	require.Equal(t, contract.AutomationStepResult{Outcome: automation.Timeout},
		e.stepOutcome(run2, "paid", 1, 2, contract.PhaseDone, automation.Timeout))
	w = e.mustStep(run2, "paid", 1)
	require.Equal(t, "completed", w.Status)
	require.Equal(t, true, output(t, w)["timed_out"])
	require.Nil(t, e.run(run2).WaitingEvent)
	e.send(tm.ID, "order.paid", cy.ID, `{"amount":500}`)
	require.Zero(t, e.outbox(store.OutboxAutomationWake, run2), "a run that no longer waits is not woken")
}

// TestRunAutomationStepSendEmailUnsendable: a send_email step skips an
// unsubscribed contact; waits (Paused) while the team's quota is used up
// or its sending is paused for its account health, and sends once that
// is over; and fails with the reason when its template was deleted after
// the automation was saved.
func TestRunAutomationStepSendEmailUnsendable(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"go"}},
		`+sendEmailStep("mail", tm.Template, `{}`)+`]`, `[{"from":"start","to":"mail"}]`)

	t.Run("unsubscribed", func(t *testing.T) {
		ct, err := e.st.Audience.CreateContact(e.ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: tm.ID,
			Email: "delivered+gone@posthaste.test", Unsubscribed: true}, nil, nil)
		require.NoError(t, err)
		_, run := e.onlyRun(tm.ID, "go", ct.ID, "")
		require.Equal(t, defaultOutcome, e.step(run, "mail", 1, 2, contract.PhaseRun), "the run goes on")
		s := e.mustStep(run, "mail", 1)
		require.Equal(t, "skipped", s.Status)
		require.Equal(t, "the contact is unsubscribed", output(t, s)["reason"])
		require.NotNil(t, s.CompletedAt)
		require.Zero(t, e.emailsTo(tm.ID, ct.Email))
	})

	t.Run("quota used up", func(t *testing.T) {
		ct := e.contact(tm.ID, "delivered+quota@posthaste.test", "", nil)
		_, run := e.onlyRun(tm.ID, "go", ct.ID, "")
		_, err := e.db.Exec(e.ctx, `INSERT INTO quota_usage (team_id, month, slot, used) VALUES ($1, $2, 0, 3000)`,
			tm.ID, store.QuotaMonth(time.Now()))
		require.NoError(t, err)
		const reason = "the team's monthly quota is used up"
		require.Equal(t, contract.AutomationStepResult{Paused: reason}, e.step(run, "mail", 1, 2, contract.PhaseRun))
		s := e.mustStep(run, "mail", 1)
		require.Equal(t, "waiting", s.Status)
		require.Equal(t, reason, stepError(t, s))
		require.Zero(t, e.emailsTo(tm.ID, ct.Email))
		require.Equal(t, store.RunRunning, e.run(run).Status)

		// The next month's quota, or a larger plan: the retry sends.
		require.NoError(t, e.st.Accounts.SetPlan(e.ctx, tm.ID, "50k"))
		require.Equal(t, defaultOutcome, e.step(run, "mail", 1, 2, contract.PhaseRun))
		s = e.mustStep(run, "mail", 1)
		require.Equal(t, "completed", s.Status)
		require.Empty(t, s.Error, "the pause's reason is cleared")
		require.NotNil(t, output(t, s)["email_id"])
		require.Equal(t, 1, e.emailsTo(tm.ID, ct.Email))
	})

	t.Run("sending paused", func(t *testing.T) {
		paused := e.team()
		e.automation(paused.ID, true, `[
			{"key":"start","type":"trigger","config":{"event_name":"go"}},
			`+sendEmailStep("mail", paused.Template, `{}`)+`]`, `[{"from":"start","to":"mail"}]`)
		ct := e.contact(paused.ID, "delivered+paused@posthaste.test", "", nil)
		_, run := e.onlyRun(paused.ID, "go", ct.ID, "")
		storetest.SeedOutcomes(t, e.st, paused.ID, map[string]int{store.EventDelivered: 90, store.EventBounced: 10})
		_, err := e.st.Insights.EvaluateHealth(e.ctx, time.Now(), health.DefaultWindow, true)
		require.NoError(t, err)
		pause, err := e.st.Insights.SendingPause(e.ctx, paused.ID)
		require.NoError(t, err)
		require.NotNil(t, pause, "10 %% bounces pause the team")

		require.Equal(t, contract.AutomationStepResult{Paused: pause.Message()}, e.step(run, "mail", 1, 2, contract.PhaseRun))
		s := e.mustStep(run, "mail", 1)
		require.Equal(t, "waiting", s.Status)
		require.Equal(t, pause.Message(), stepError(t, s))
		require.Zero(t, e.emailsTo(paused.ID, ct.Email))

		resumed, err := e.st.Insights.ResumeSending(e.ctx, paused.ID, time.Now())
		require.NoError(t, err)
		require.True(t, resumed)
		require.Equal(t, defaultOutcome, e.step(run, "mail", 1, 2, contract.PhaseRun))
		require.Equal(t, "completed", e.mustStep(run, "mail", 1).Status)
		require.Equal(t, 1, e.emailsTo(paused.ID, ct.Email))
	})

	t.Run("template deleted", func(t *testing.T) {
		other := e.team()
		e.automation(other.ID, true, `[
			{"key":"start","type":"trigger","config":{"event_name":"go"}},
			`+sendEmailStep("mail", other.Template, `{}`)+`]`, `[{"from":"start","to":"mail"}]`)
		ct := e.contact(other.ID, "delivered+tpl@posthaste.test", "", nil)
		_, run := e.onlyRun(other.ID, "go", ct.ID, "")
		_, err := e.tpls.Delete(e.ctx, other.ID, other.Template.ID.String())
		require.NoError(t, err)

		res := e.step(run, "mail", 1, 2, contract.PhaseRun)
		require.Contains(t, res.Error, `step "mail": `)
		require.Contains(t, res.Error, "not found")
		require.False(t, res.Cancelled)
		require.Empty(t, res.Outcome)
		s := e.mustStep(run, "mail", 1)
		require.Equal(t, "failed", s.Status)
		require.Contains(t, stepError(t, s), other.Template.ID.String())
		require.Contains(t, stepError(t, s), "not found")
		require.NotNil(t, s.CompletedAt)
		require.Zero(t, e.emailsTo(other.ID, ct.Email))

		require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: run,
			Status: contract.RunFailed, Error: res.Error}))
		r := e.run(run)
		require.Equal(t, store.RunFailed, r.Status)
		require.NotNil(t, r.Error)
		require.Equal(t, res.Error, *r.Error)
	})
}

// TestRunAutomationStepCondition: a condition follows condition_met or
// condition_not_met by the triggering event's payload and by the
// contact's properties, and records its result.
func TestRunAutomationStepCondition(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	e.property(tm.ID, "company", "string")
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"plan.changed"}},
		{"key":"pro","type":"condition","config":{"type":"rule","field":"event.plan","operator":"eq","value":"pro"}}]`,
		`[{"from":"start","to":"pro"}]`)
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"profile.checked"}},
		{"key":"acme","type":"condition","config":{"type":"and","rules":[
			{"type":"rule","field":"contact.company","operator":"eq","value":"Acme"},
			{"type":"rule","field":"contact.first_name","operator":"starts_with","value":"A"}]}}]`,
		`[{"from":"start","to":"acme"}]`)
	ann := e.contact(tm.ID, "delivered+ann@posthaste.test", "Ann", map[string]any{"company": "Acme"})
	ben := e.contact(tm.ID, "delivered+ben@posthaste.test", "Ann", map[string]any{"company": "Other"})

	for _, tc := range []struct {
		name    string
		event   string
		contact uuid.UUID
		payload string
		key     string
		met     bool
	}{
		{"payload meets it", "plan.changed", ann.ID, `{"plan":"pro"}`, "pro", true},
		{"payload does not", "plan.changed", ben.ID, `{"plan":"free"}`, "pro", false},
		{"contact property meets it", "profile.checked", ann.ID, `{}`, "acme", true},
		{"contact property does not", "profile.checked", ben.ID, `{}`, "acme", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, run := e.onlyRun(tm.ID, tc.event, tc.contact, tc.payload)
			want := automation.ConditionNotMet
			if tc.met {
				want = automation.ConditionMet
			}
			require.Equal(t, contract.AutomationStepResult{Outcome: want}, e.step(run, tc.key, 1, 2, contract.PhaseRun))
			s := e.mustStep(run, tc.key, 1)
			require.Equal(t, "completed", s.Status)
			require.Equal(t, automation.Condition, s.Type)
			require.Equal(t, tc.met, output(t, s)["result"])
		})
	}
}

// TestRunAutomationStepContactUpdate: a contact_update step sets names,
// properties and the unsubscribed flag from values and references.
func TestRunAutomationStepContactUpdate(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	e.property(tm.ID, "company", "string")
	e.property(tm.ID, "score", "number")
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"profile.filled"}},
		{"key":"update","type":"contact_update","config":{"first_name":{"var":"event.first"},"last_name":"Smith",
			"unsubscribed":{"var":"event.opt_out"},"properties":{"company":{"var":"event.company.name"},"score":7}}}]`,
		`[{"from":"start","to":"update"}]`)
	ct := e.contact(tm.ID, "delivered+upd@posthaste.test", "Old", map[string]any{"company": "Before"})
	_, run := e.onlyRun(tm.ID, "profile.filled", ct.ID,
		`{"first":"Zoe","opt_out":true,"company":{"name":"Acme"}}`)

	require.Equal(t, defaultOutcome, e.step(run, "update", 1, 2, contract.PhaseRun))
	s := e.mustStep(run, "update", 1)
	require.Equal(t, "completed", s.Status)
	require.Equal(t, ct.ID.String(), output(t, s)["contact_id"])
	got, err := e.st.Audience.Contact(e.ctx, tm.ID, store.ContactRef{ID: &ct.ID})
	require.NoError(t, err)
	require.Equal(t, "Zoe", got.FirstName)
	require.Equal(t, "Smith", got.LastName)
	require.True(t, got.Unsubscribed)
	require.Equal(t, map[string]any{"company": "Acme", "score": float64(7)}, got.Properties)

	// A reference the payload lacks leaves the field as it is.
	other := e.contact(tm.ID, "delivered+upd2@posthaste.test", "Keep", nil)
	_, run2 := e.onlyRun(tm.ID, "profile.filled", other.ID, `{}`)
	require.Equal(t, defaultOutcome, e.step(run2, "update", 1, 2, contract.PhaseRun))
	got, err = e.st.Audience.Contact(e.ctx, tm.ID, store.ContactRef{ID: &other.ID})
	require.NoError(t, err)
	require.Equal(t, "Keep", got.FirstName)
	require.Equal(t, "Smith", got.LastName)
	require.False(t, got.Unsubscribed)
	require.Equal(t, map[string]any{"score": float64(7)}, got.Properties)
}

// TestRunAutomationStepAddToSegment: an add_to_segment step adds the
// contact, and fails naming the segment once it was deleted.
func TestRunAutomationStepAddToSegment(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	seg, err := e.st.Audience.CreateSegment(e.ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: tm.ID, Name: "vip"})
	require.NoError(t, err)
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"vip"}},
		{"key":"add","type":"add_to_segment","config":{"segment_id":"`+seg.ID.String()+`"}}]`,
		`[{"from":"start","to":"add"}]`)
	ct := e.contact(tm.ID, "delivered+seg@posthaste.test", "", nil)
	_, run := e.onlyRun(tm.ID, "vip", ct.ID, "")
	require.Equal(t, defaultOutcome, e.step(run, "add", 1, 2, contract.PhaseRun))
	s := e.mustStep(run, "add", 1)
	require.Equal(t, "completed", s.Status)
	require.Equal(t, seg.ID.String(), output(t, s)["segment_id"])
	got, err := e.st.Audience.Contact(e.ctx, tm.ID, store.ContactRef{ID: &ct.ID})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{seg.ID}, got.SegmentIDs)
	require.Equal(t, defaultOutcome, e.step(run, "add", 1, 2, contract.PhaseRun), "a retry adds nothing twice")

	_, err = e.st.Audience.DeleteSegment(e.ctx, tm.ID, seg.ID)
	require.NoError(t, err)
	ct2 := e.contact(tm.ID, "delivered+seg2@posthaste.test", "", nil)
	_, run2 := e.onlyRun(tm.ID, "vip", ct2.ID, "")
	res := e.step(run2, "add", 1, 2, contract.PhaseRun)
	require.Equal(t, `step "add": the segment `+seg.ID.String()+` no longer exists`, res.Error)
	s = e.mustStep(run2, "add", 1)
	require.Equal(t, "failed", s.Status)
	require.Equal(t, "the segment "+seg.ID.String()+" no longer exists", stepError(t, s))
}

// TestRunAutomationStepContactDelete: a contact_delete step deletes the
// contact; the deletion does not cancel the run that deletes it, whose
// step completes, but cancels the contact's other running runs and wakes
// their workflows through the outbox.
func TestRunAutomationStepContactDelete(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"account.closed"}},
		{"key":"forget","type":"contact_delete","config":{}}]`,
		`[{"from":"start","to":"forget"}]`)
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"trial.started"}},
		{"key":"later","type":"delay","config":{"duration":"3 days"}}]`,
		`[{"from":"start","to":"later"}]`)
	ct := e.contact(tm.ID, "delivered+bye@posthaste.test", "", nil)
	_, other := e.onlyRun(tm.ID, "trial.started", ct.ID, "")
	require.Equal(t, nothingYet, e.step(other, "later", 1, 2, contract.PhaseWait))
	_, run := e.onlyRun(tm.ID, "account.closed", ct.ID, "")
	require.Equal(t, defaultOutcome, e.step(run, "start", 1, 1, contract.PhaseRun))

	require.Equal(t, nothingYet, e.step(run, "forget", 1, 2, contract.PhaseRun), "no connection leaves it: the run ends")
	_, err := e.st.Audience.Contact(e.ctx, tm.ID, store.ContactRef{ID: &ct.ID})
	require.ErrorIs(t, err, store.ErrNotFound, "the contact is deleted")

	r := e.run(run)
	require.Equal(t, store.RunRunning, r.Status, "its own deletion does not cancel the run")
	require.Nil(t, r.ContactID)
	s := e.mustStep(run, "forget", 1)
	require.Equal(t, "completed", s.Status)
	require.Equal(t, true, output(t, s)["deleted"])
	require.Zero(t, e.outbox(store.OutboxAutomationWake, run))

	o := e.run(other)
	require.Equal(t, store.RunCancelled, o.Status, "the contact's other run is cancelled")
	require.NotNil(t, o.Error)
	require.Equal(t, "the contact was deleted", *o.Error)
	require.NotNil(t, o.CompletedAt)
	require.Equal(t, 1, e.outbox(store.OutboxAutomationWake, other), "and its workflow woken")
	require.Equal(t, cancelled, e.step(other, "later", 1, 2, contract.PhaseWait))

	// A retry of the step finds the contact gone and completes it again.
	require.Equal(t, nothingYet, e.step(run, "forget", 1, 2, contract.PhaseRun))
	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: run,
		Status: contract.RunCompleted}))
	require.Equal(t, store.RunCompleted, e.run(run).Status)
}

// TestRunAutomationStepAfterStopOrDelete: after a stop the step answers
// Cancelled and records nothing (and sends nothing); a run whose
// automation was deleted loads as cancelled.
func TestRunAutomationStepAfterStopOrDelete(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	a := e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"go"}},
		`+sendEmailStep("mail", tm.Template, `{}`)+`]`, `[{"from":"start","to":"mail"}]`)
	ct := e.contact(tm.ID, "delivered+stop@posthaste.test", "", nil)
	_, run := e.onlyRun(tm.ID, "go", ct.ID, "")
	require.Equal(t, defaultOutcome, e.step(run, "start", 1, 1, contract.PhaseRun))

	_, err := e.svc.Stop(e.ctx, tm.ID, a.ID)
	require.NoError(t, err)
	require.Equal(t, cancelled, e.step(run, "mail", 1, 2, contract.PhaseRun))
	_, ok := e.stepRow(run, "mail", 1)
	require.False(t, ok, "nothing is recorded")
	require.Zero(t, e.emailsTo(tm.ID, ct.Email), "nothing is sent")
	for _, phase := range []string{contract.PhaseWait, contract.PhaseCheck, contract.PhaseDone} {
		require.Equal(t, cancelled, e.step(run, "mail", 1, 2, phase), phase)
	}
	require.Len(t, e.run(run).Steps, 1)
	plan, err := e.acts.LoadAutomationRun(e.ctx, contract.AutomationRunRef{RunID: run})
	require.NoError(t, err)
	require.Equal(t, contract.RunCancelled, plan.Status)

	b := e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"again"}},
		`+sendEmailStep("mail", tm.Template, `{}`)+`]`, `[{"from":"start","to":"mail"}]`)
	_, run2 := e.onlyRun(tm.ID, "again", ct.ID, "")
	require.NoError(t, e.svc.Delete(e.ctx, tm.ID, b.ID))
	plan, err = e.acts.LoadAutomationRun(e.ctx, contract.AutomationRunRef{RunID: run2})
	require.NoError(t, err)
	require.Equal(t, contract.RunCancelled, plan.Status)
	require.Equal(t, cancelled, e.step(run2, "mail", 1, 2, contract.PhaseRun))
	require.Equal(t, 1, e.outbox(store.OutboxAutomationWake, run2), "the deleted automation's run is woken to end")
	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: run2,
		Status: contract.RunCompleted}), "finishing a run that is gone is no error")
	require.Zero(t, e.emailsTo(tm.ID, ct.Email))
}

// TestRunAutomationStepWaitForEventRetriedCheck: a check that found its
// event, retried (its answer was lost: the worker died, a local activity
// ran again on replay), answers event_received again rather than nothing,
// so the run does not wait on for an event it already received.
func TestRunAutomationStepWaitForEventRetriedCheck(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"order.created"}},
		{"key":"paid","type":"wait_for_event","config":{"event_name":"order.paid","timeout":"1 day"}}]`,
		`[{"from":"start","to":"paid"}]`)
	ct := e.contact(tm.ID, "delivered+retry@posthaste.test", "", nil)
	_, run := e.onlyRun(tm.ID, "order.created", ct.ID, "")
	require.Equal(t, nothingYet, e.step(run, "paid", 1, 2, contract.PhaseWait))
	paid := e.send(tm.ID, "order.paid", ct.ID, `{}`)
	received := contract.AutomationStepResult{Outcome: automation.EventReceived}
	require.Equal(t, received, e.step(run, "paid", 1, 2, contract.PhaseCheck))
	require.Equal(t, received, e.step(run, "paid", 1, 2, contract.PhaseCheck), "the retry answers the same")
	s := e.mustStep(run, "paid", 1)
	require.Equal(t, "completed", s.Status)
	require.Equal(t, paid.ID.String(), output(t, s)["event_id"])
}

// TestRunAutomationStepWaitForEventManyPassedOver: a filter rule finds the
// event that meets it however many that do not were sent before it.
func TestRunAutomationStepWaitForEventManyPassedOver(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"trial.started"}},
		{"key":"pricing","type":"wait_for_event","config":{"event_name":"page.viewed",
			"filter_rule":{"type":"rule","field":"event.page","operator":"eq","value":"pricing"}}}]`,
		`[{"from":"start","to":"pricing"}]`)
	ct := e.contact(tm.ID, "delivered+pages@posthaste.test", "", nil)
	_, run := e.onlyRun(tm.ID, "trial.started", ct.ID, "")
	require.Equal(t, nothingYet, e.step(run, "pricing", 1, 2, contract.PhaseWait))
	for range 120 {
		e.send(tm.ID, "page.viewed", ct.ID, `{"page":"docs"}`)
	}
	require.Equal(t, nothingYet, e.step(run, "pricing", 1, 2, contract.PhaseCheck))
	pricing := e.send(tm.ID, "page.viewed", ct.ID, `{"page":"pricing"}`)
	require.Equal(t, contract.AutomationStepResult{Outcome: automation.EventReceived},
		e.step(run, "pricing", 1, 2, contract.PhaseCheck))
	require.Equal(t, pricing.ID.String(), output(t, e.mustStep(run, "pricing", 1))["event_id"])
}

// TestRunAutomationStepFolded walks trigger -> delay -> send_email as an
// interpreterFolded run does: the delay's wait records the trigger with
// it, the email records the delay's end with it and, being the last
// step, ends the run in the same call; a retry of that call finds the
// run over and sends nothing. A run ending in a delay records the
// delay's end with the run's, and a step that fails ends its run failed.
func TestRunAutomationStepFolded(t *testing.T) {
	t.Parallel()
	e := newAutoEnv(t)
	tm := e.team()
	ann := e.contact(tm.ID, "delivered+folded@posthaste.test", "Ann", nil)
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"folded"}},
		{"key":"wait","type":"delay","config":{"duration":"1 hour"}},
		`+sendEmailStep("welcome", tm.Template, `{"PLAN":"pro","NAME":"Ann"}`)+`]`,
		`[{"from":"start","to":"wait"},{"from":"wait","to":"welcome"}]`)
	sent, run := e.onlyRun(tm.ID, "folded", ann.ID, "")
	call := func(key string, seq int, phase string, done *contract.AutomationStepDone) contract.AutomationStepResult {
		t.Helper()
		res, err := e.acts.RunAutomationStep(e.ctx, contract.AutomationStepInput{RunID: run, Key: key, Iteration: 1,
			Seq: seq, Phase: phase, Done: done, EndRun: true})
		require.NoError(t, err)
		return res
	}

	require.Equal(t, nothingYet, call("wait", 2, contract.PhaseWait,
		&contract.AutomationStepDone{Key: "start", Iteration: 1, Seq: 1, Outcome: automation.Default}))
	trig := e.mustStep(run, "start", 1)
	require.Equal(t, "completed", trig.Status)
	require.Equal(t, sent.ID.String(), output(t, trig)["event_id"])
	require.Equal(t, "waiting", e.mustStep(run, "wait", 1).Status)
	require.Equal(t, store.RunRunning, e.run(run).Status)

	waitDone := &contract.AutomationStepDone{Key: "wait", Iteration: 1, Seq: 2, Outcome: automation.Default}
	require.Equal(t, contract.AutomationStepResult{Outcome: automation.Default, Finished: true},
		call("welcome", 3, contract.PhaseRun, waitDone))
	wait := e.mustStep(run, "wait", 1)
	require.Equal(t, "completed", wait.Status)
	require.NotNil(t, wait.CompletedAt)
	require.Equal(t, "completed", e.mustStep(run, "welcome", 1).Status)
	r := e.run(run)
	require.Equal(t, store.RunCompleted, r.Status, "the last step's call ends the run")
	require.NotNil(t, r.CompletedAt)
	require.Equal(t, 1, e.emailsTo(tm.ID, ann.Email))
	require.Equal(t, cancelled, call("welcome", 3, contract.PhaseRun, waitDone), "a retry finds the run over")
	require.Equal(t, 1, e.emailsTo(tm.ID, ann.Email), "and sends nothing")

	// A run that ends in a delay: its end records the delay's.
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"tail"}},
		{"key":"pause","type":"delay","config":{"duration":"1 hour"}}]`,
		`[{"from":"start","to":"pause"}]`)
	_, tail := e.onlyRun(tm.ID, "tail", ann.ID, "")
	require.NoError(t, e.acts.FinishAutomationRun(e.ctx, contract.AutomationFinishInput{RunID: tail,
		Status: contract.RunCompleted,
		Done:   &contract.AutomationStepDone{Key: "pause", Iteration: 1, Seq: 2, Outcome: automation.Default}}))
	require.Equal(t, "completed", e.mustStep(tail, "pause", 1).Status)
	require.Equal(t, store.RunCompleted, e.run(tail).Status)

	// A step that fails ends its run failed, with its reason.
	seg, err := e.st.Audience.CreateSegment(e.ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: tm.ID, Name: "gone"})
	require.NoError(t, err)
	e.automation(tm.ID, true, `[
		{"key":"start","type":"trigger","config":{"event_name":"lost"}},
		{"key":"add","type":"add_to_segment","config":{"segment_id":"`+seg.ID.String()+`"}}]`,
		`[{"from":"start","to":"add"}]`)
	_, err = e.st.Audience.DeleteSegment(e.ctx, tm.ID, seg.ID)
	require.NoError(t, err)
	_, lost := e.onlyRun(tm.ID, "lost", ann.ID, "")
	res, err := e.acts.RunAutomationStep(e.ctx, contract.AutomationStepInput{RunID: lost, Key: "add", Iteration: 1,
		Seq: 2, Phase: contract.PhaseRun, EndRun: true,
		Done: &contract.AutomationStepDone{Key: "start", Iteration: 1, Seq: 1, Outcome: automation.Default}})
	require.NoError(t, err)
	require.True(t, res.Finished)
	require.Equal(t, `step "add": the segment `+seg.ID.String()+` no longer exists`, res.Error)
	require.Equal(t, "completed", e.mustStep(lost, "start", 1).Status)
	require.Equal(t, "failed", e.mustStep(lost, "add", 1).Status)
	l := e.run(lost)
	require.Equal(t, store.RunFailed, l.Status)
	require.NotNil(t, l.Error)
	require.Equal(t, res.Error, *l.Error)
}
