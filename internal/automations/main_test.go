package automations_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/automation"
	"github.com/posthaste/posthaste/workflows/contract"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// autoEnv is one test's database with the slice over it: the Service,
// the Activities sending through a real submit.Service (the API's send
// path, with the account-health gate), and a pool of the test's own for
// the rows no API reads (the outbox, quota usage, emails by recipient).
type autoEnv struct {
	t    *testing.T
	ctx  context.Context
	st   *store.Store
	db   *pgxpool.Pool
	svc  *automations.Service
	acts *automations.Activities
	aud  *audience.Service
	tpls *templates.Service
}

func newAutoEnv(t *testing.T) *autoEnv {
	t.Helper()
	ctx := context.Background()
	st, url := storetest.NewWithURL(t)
	db, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	sub := submit.New(submit.Config{Store: submit.StoreOf(st), Health: st.Insights, PublicURL: "https://mail.example.test"})
	return &autoEnv{t: t, ctx: ctx, st: st, db: db, svc: automations.NewService(st),
		acts: automations.NewActivities(st, sub), aud: audience.New(st.Audience), tpls: templates.New(st)}
}

// autoTeam is a team with a published template whose variables PLAN, NAME
// and REF the automations fill.
type autoTeam struct {
	ID       uuid.UUID
	Template store.Template
}

func (e *autoEnv) team() autoTeam {
	e.t.Helper()
	id := uuid.Must(uuid.NewV7())
	require.NoError(e.t, e.st.Accounts.CreateTeam(e.ctx, store.Team{ID: id, Name: "t"}))
	name, from, subject := "Welcome", "Acme <onboarding@posthaste.test>", "Welcome {{{NAME}}}"
	html := "<p>Plan {{{PLAN}}} for {{{NAME}}}, ref {{{REF}}}</p>"
	vars := []templates.Variable{
		{Key: "PLAN", Type: "string", Fallback: json.RawMessage(`"basic"`)},
		{Key: "NAME", Type: "string", Fallback: json.RawMessage(`"friend"`)},
		{Key: "REF", Type: "string", Fallback: json.RawMessage(`"none"`)},
	}
	tpl, err := e.tpls.Create(e.ctx, id, templates.Edit{Name: &name, From: &from, Subject: &subject, HTML: &html,
		Variables: &vars})
	require.NoError(e.t, err)
	tpl, err = e.tpls.Publish(e.ctx, id, tpl.ID.String())
	require.NoError(e.t, err)
	return autoTeam{ID: id, Template: tpl}
}

// contact adds a contact to the team.
func (e *autoEnv) contact(team uuid.UUID, email, first string, props map[string]any) store.Contact {
	e.t.Helper()
	ct, err := e.st.Audience.CreateContact(e.ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team, Email: email,
		FirstName: first, Properties: props}, nil, nil)
	require.NoError(e.t, err)
	return ct
}

// property defines a contact property of the team.
func (e *autoEnv) property(team uuid.UUID, key, typ string) {
	e.t.Helper()
	_, err := e.aud.CreateProperty(e.ctx, team, audience.PropertyInput{Key: &key, Type: &typ})
	require.NoError(e.t, err)
}

// graph reads steps and connections written as JSON.
func graph(t *testing.T, steps, conns string) ([]automation.Step, []automation.Connection) {
	t.Helper()
	var s []automation.Step
	require.NoError(t, json.Unmarshal([]byte(steps), &s), steps)
	var c []automation.Connection
	require.NoError(t, json.Unmarshal([]byte(conns), &c), conns)
	return s, c
}

// automation saves an automation of the team, enabled or not.
func (e *autoEnv) automation(team uuid.UUID, enabled bool, steps, conns string) store.Automation {
	e.t.Helper()
	s, c := graph(e.t, steps, conns)
	status := store.AutomationDisabled
	if enabled {
		status = store.AutomationEnabled
	}
	name := "auto " + uuid.NewString()[:8]
	a, err := e.svc.Create(e.ctx, team, automations.AutomationInput{Name: &name, Status: &status, Steps: s,
		Connections: c, HasSteps: true, HasConnections: true})
	require.NoError(e.t, err)
	return a
}

// send sends an event for a contact through the Service.
func (e *autoEnv) send(team uuid.UUID, event string, contact uuid.UUID, payload string) automations.Sent {
	e.t.Helper()
	id := contact.String()
	in := automations.SendInput{Event: event, ContactID: &id}
	if payload != "" {
		in.Payload = json.RawMessage(payload)
	}
	sent, err := e.svc.SendEvent(e.ctx, team, in)
	require.NoError(e.t, err)
	return sent
}

// onlyRun sends an event that starts exactly one run and returns it.
func (e *autoEnv) onlyRun(team uuid.UUID, event string, contact uuid.UUID, payload string) (automations.Sent, uuid.UUID) {
	e.t.Helper()
	sent := e.send(team, event, contact, payload)
	require.Len(e.t, sent.Runs, 1, "the event starts one run")
	return sent, sent.Runs[0]
}

// step calls RunAutomationStep as the workflow does.
func (e *autoEnv) step(run uuid.UUID, key string, iteration, seq int, phase string) contract.AutomationStepResult {
	e.t.Helper()
	return e.stepOutcome(run, key, iteration, seq, phase, "")
}

func (e *autoEnv) stepOutcome(run uuid.UUID, key string, iteration, seq int, phase, outcome string) contract.AutomationStepResult {
	e.t.Helper()
	res, err := e.acts.RunAutomationStep(e.ctx, contract.AutomationStepInput{RunID: run, Key: key, Iteration: iteration,
		Seq: seq, Phase: phase, Outcome: outcome})
	require.NoError(e.t, err)
	return res
}

// run returns a run with its steps.
func (e *autoEnv) run(run uuid.UUID) store.AutomationRun {
	e.t.Helper()
	r, err := e.st.Automations.Run(e.ctx, run)
	require.NoError(e.t, err)
	full, err := e.st.Automations.AutomationRun(e.ctx, r.TeamID, r.AutomationID, run)
	require.NoError(e.t, err)
	return full
}

// stepRow returns the record of one visit of a step of a run; ok false
// when there is none.
func (e *autoEnv) stepRow(run uuid.UUID, key string, iteration int) (store.AutomationRunStep, bool) {
	e.t.Helper()
	for _, s := range e.run(run).Steps {
		if s.Key == key && s.Iteration == iteration {
			return s, true
		}
	}
	return store.AutomationRunStep{}, false
}

func (e *autoEnv) mustStep(run uuid.UUID, key string, iteration int) store.AutomationRunStep {
	e.t.Helper()
	s, ok := e.stepRow(run, key, iteration)
	require.True(e.t, ok, "step %s/%d of run %s is recorded", key, iteration, run)
	return s
}

// output decodes a step's output.
func output(t *testing.T, s store.AutomationRunStep) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(s.Output) > 0 {
		require.NoError(t, json.Unmarshal(s.Output, &m))
	}
	return m
}

// stepError is the message of a failed or paused step's error.
func stepError(t *testing.T, s store.AutomationRunStep) string {
	t.Helper()
	if len(s.Error) == 0 {
		return ""
	}
	var m struct {
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(s.Error, &m))
	return m.Message
}

// outbox counts the outbox entries of a kind for a ref.
func (e *autoEnv) outbox(kind string, ref uuid.UUID) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.QueryRow(e.ctx, `SELECT count(*) FROM outbox WHERE kind = $1 AND ref = $2`, kind, ref).Scan(&n))
	return n
}

// emailsTo counts the team's emails to an address.
func (e *autoEnv) emailsTo(team uuid.UUID, addr string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.QueryRow(e.ctx, `SELECT count(*) FROM email WHERE team_id = $1 AND $2 = ANY (rcpt_addrs)`,
		team, addr).Scan(&n))
	return n
}

// sendEmailStep is the JSON of a send_email step of the team's template.
func sendEmailStep(key string, tpl store.Template, vars string) string {
	return fmt.Sprintf(`{"key":%q,"type":"send_email","config":{"template":{"id":%q,"variables":%s}}}`,
		key, tpl.ID, vars)
}
