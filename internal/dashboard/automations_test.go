package dashboard_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/automation"
)

// automationFixture is the dashboard with an automations service, team A
// signed in, and team A's published template and segment.
type automationFixture struct {
	*fixture
	svc      *automations.Service
	c        *http.Client
	teamA    uuid.UUID
	template store.Template
	draft    store.Template
	segment  store.Segment
}

func newAutomationFixture(t *testing.T, opts ...func(*dashboard.Config)) *automationFixture {
	t.Helper()
	st := storetest.New(t)
	svc := automations.NewService(st)
	f := newFixtureOn(t, st, append([]func(*dashboard.Config){func(cfg *dashboard.Config) { cfg.Automations = svc }}, opts...)...)
	af := &automationFixture{fixture: f, svc: svc, c: f.browser(), teamA: uuid.MustParse(f.a.TeamID)}
	res, _ := f.login(af.c, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	ctx := context.Background()
	tpl := templates.New(st)
	name, body, from := "Welcome", "<p>Hi {{{FIRST_NAME|there}}}</p>", "Acme <hello@posthaste.test>"
	created, err := tpl.Create(ctx, af.teamA, templates.Edit{Name: &name, HTML: &body, From: &from})
	require.NoError(t, err)
	af.template, err = tpl.Publish(ctx, af.teamA, created.ID.String())
	require.NoError(t, err)
	draftName := "Unpublished draft"
	af.draft, err = tpl.Create(ctx, af.teamA, templates.Edit{Name: &draftName, HTML: &body})
	require.NoError(t, err)
	af.segment, err = st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: af.teamA, Name: "Pro users"})
	require.NoError(t, err)
	return af
}

// graph is a definition as the editor posts it.
func graph(steps []automation.Step, conns []automation.Connection) string {
	b, err := json.Marshal(automation.Definition{Steps: steps, Connections: conns})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func step(key, typ, config string) automation.Step {
	return automation.Step{Key: key, Type: typ, Config: json.RawMessage(config)}
}

// welcome is trigger → delay → send_email → add_to_segment.
func (f *automationFixture) welcome(delay string) ([]automation.Step, []automation.Connection) {
	return []automation.Step{
			step("trigger", automation.Trigger, `{"event_name":"user.signed_up"}`),
			step("delay_1", automation.Delay, `{"duration":"`+delay+`"}`),
			step("send_email_1", automation.SendEmail, `{"template":{"id":"`+f.template.ID.String()+
				`","variables":{"PLAN":{"var":"event.plan"}}},"subject":"Welcome!"}`),
			step("add_to_segment_1", automation.AddToSegment, `{"segment_id":"`+f.segment.ID.String()+`"}`),
		}, []automation.Connection{
			{From: "trigger", To: "delay_1", Type: automation.Default},
			{From: "delay_1", To: "send_email_1", Type: automation.Default},
			{From: "send_email_1", To: "add_to_segment_1", Type: automation.Default},
		}
}

// page gets a page of team A's browser.
func (f *automationFixture) page(path string) (*http.Response, string) {
	return get(f.t, f.c, f.srv.URL+path)
}

// submit posts form to path with the CSRF token of the page at from.
func (f *automationFixture) submit(from, path string, form url.Values) (*http.Response, string) {
	_, page := f.page(from)
	form.Set("csrf", csrf(f.t, page))
	return post(f.t, f.c, f.srv.URL+path, form)
}

func (f *automationFixture) load(id uuid.UUID) (store.Automation, automation.Definition) {
	a, err := f.svc.Get(context.Background(), f.teamA, id)
	require.NoError(f.t, err)
	var def automation.Definition
	require.NoError(f.t, json.Unmarshal(a.Definition, &def))
	return a, def
}

// requireSameGraph compares definitions by value (configs as JSON).
func requireSameGraph(t *testing.T, wantSteps []automation.Step, wantConns []automation.Connection, got automation.Definition) {
	t.Helper()
	require.Len(t, got.Steps, len(wantSteps))
	for i, s := range wantSteps {
		require.Equal(t, s.Key, got.Steps[i].Key)
		require.Equal(t, s.Type, got.Steps[i].Type)
		require.JSONEq(t, string(s.Config), string(got.Steps[i].Config), s.Key)
	}
	require.ElementsMatch(t, wantConns, got.Connections)
}

func TestAutomationsListAndEditor(t *testing.T) {
	t.Parallel()
	f := newAutomationFixture(t)
	res, page := f.page("/dashboard/automations")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `href="/dashboard/automations" aria-current="page"`, "in the navigation")
	require.Contains(t, page, "No automations yet.")

	// The editor of a new automation: its trigger alone, and the team's
	// published templates (not its drafts) and segments to pick from.
	res, page = f.page("/dashboard/automations/new")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `id="automation-editor"`)
	require.Contains(t, page, `/dashboard/assets/automation-editor.js`)
	require.Contains(t, page, `name="definition"`)
	require.Contains(t, page, html.EscapeString(`"type": "trigger"`))
	require.Contains(t, page, f.template.ID.String())
	require.NotContains(t, page, f.draft.ID.String(), "drafts cannot be sent")
	require.Contains(t, page, f.segment.ID.String())

	// Saved from a posted graph.
	steps, conns := f.welcome("2 days")
	res, _ = f.submit("/dashboard/automations/new", "/dashboard/automations", url.Values{"name": {"Welcome series"},
		"definition": {graph(steps, conns)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "?done=created")
	id := idAfter(t, res, "/dashboard/automations/")
	a, def := f.load(id)
	require.Equal(t, "Welcome series", a.Name)
	require.Equal(t, store.AutomationDisabled, a.Status)
	require.Equal(t, "user.signed_up", a.EventName)
	requireSameGraph(t, steps, conns, def)

	// The editor shows it back, the list lists it.
	res, page = f.page("/dashboard/automations/" + id.String() + "?done=created")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Automation saved.")
	require.Contains(t, page, "Welcome series")
	require.Contains(t, page, html.EscapeString(`"key": "send_email_1"`))
	require.Contains(t, page, `id="au-save-enable"`)
	res, page = f.page("/dashboard/automations")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `data-automation="`+id.String()+`"`)
	require.Contains(t, page, "<code>user.signed_up</code>")
	require.Contains(t, page, `<span class="badge neutral">disabled</span>`)
	require.Contains(t, page, `data-runs="running">0<`)

	// Save and enable: a new version, enabled.
	steps[1] = step("delay_1", automation.Delay, `{"duration":"3 days"}`)
	res, _ = f.submit("/dashboard/automations/"+id.String(), "/dashboard/automations/"+id.String(),
		url.Values{"name": {"Welcome series v2"}, "definition": {graph(steps, conns)}, "status": {"enabled"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/automations/"+id.String()+"?done=enabled", res.Header.Get("Location"))
	a, def = f.load(id)
	require.Equal(t, store.AutomationEnabled, a.Status)
	require.Equal(t, 2, a.Version)
	require.Equal(t, "Welcome series v2", a.Name)
	requireSameGraph(t, steps, conns, def)
	_, page = f.page("/dashboard/automations/" + id.String())
	require.NotContains(t, page, `id="au-save-enable"`)
	require.Contains(t, page, `id="au-stop"`)

	// Stop and enable from the list, which they return to.
	res, _ = f.submit("/dashboard/automations", "/dashboard/automations/"+id.String()+"/stop", url.Values{"from": {"list"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/automations?done=stopped", res.Header.Get("Location"))
	a, _ = f.load(id)
	require.Equal(t, store.AutomationDisabled, a.Status)
	_, page = f.page("/dashboard/automations?done=stopped")
	require.Contains(t, page, "Stopped:")
	require.Contains(t, page, `aria-label="Enable Welcome series v2"`)
	res, _ = f.submit("/dashboard/automations", "/dashboard/automations/"+id.String()+"/enable", url.Values{"from": {"list"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	a, _ = f.load(id)
	require.Equal(t, store.AutomationEnabled, a.Status)
	_, page = f.page("/dashboard/automations?status=enabled")
	require.Contains(t, page, `aria-label="Stop Welcome series v2"`)
	_, page = f.page("/dashboard/automations?status=disabled")
	require.Contains(t, page, "No disabled automation.")

	// Duplicate: a disabled copy, opened in the editor.
	res, _ = f.submit("/dashboard/automations", "/dashboard/automations/"+id.String()+"/duplicate", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	copyID := idAfter(t, res, "/dashboard/automations/")
	require.NotEqual(t, id, copyID)
	c, cdef := f.load(copyID)
	require.Equal(t, "Welcome series v2 (copy)", c.Name)
	require.Equal(t, store.AutomationDisabled, c.Status)
	requireSameGraph(t, steps, conns, cdef)

	// Delete, after its confirmation page.
	res, page = f.page("/dashboard/automations/" + copyID.String() + "/delete")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Delete Welcome series v2 (copy)?")
	res, _ = f.submit("/dashboard/automations/"+copyID.String()+"/delete", "/dashboard/automations/"+copyID.String()+"/delete", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/automations?done=deleted", res.Header.Get("Location"))
	_, err := f.svc.Get(context.Background(), f.teamA, copyID)
	require.ErrorIs(t, err, store.ErrNotFound)
	res, _ = f.page("/dashboard/automations/" + copyID.String())
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// Every write needs the form's CSRF token.
	res, _ = post(t, f.c, f.srv.URL+"/dashboard/automations/"+id.String()+"/stop", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	a, _ = f.load(id)
	require.Equal(t, store.AutomationEnabled, a.Status)
}

// TestAutomationRefusedKeepsDraft: a graph the service refuses comes back
// with its message, naming the step, over the draft as it was posted.
func TestAutomationRefusedKeepsDraft(t *testing.T) {
	t.Parallel()
	f := newAutomationFixture(t)
	steps, conns := f.welcome("soon")
	def := graph(steps, conns)
	res, page := f.submit("/dashboard/automations/new", "/dashboard/automations",
		url.Values{"name": {"Draft kept"}, "definition": {def}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `id="automation-error"`)
	require.Contains(t, page, html.EscapeString(`step "delay_1": duration:`))
	require.Contains(t, page, `data-error-step="delay_1"`)
	require.Contains(t, page, `value="Draft kept"`)
	require.Contains(t, page, html.EscapeString(def), "the draft as posted")
	list, _, err := f.svc.List(context.Background(), f.teamA, "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list, "nothing saved")

	// A template that is not published, a step nothing leads to, JSON that
	// is no graph: each refused with its reason.
	steps, conns = f.welcome("1 hour")
	steps[2] = step("send_email_1", automation.SendEmail, `{"template":{"id":"`+f.draft.ID.String()+`"}}`)
	res, page = f.submit("/dashboard/automations/new", "/dashboard/automations",
		url.Values{"name": {"Draft kept"}, "definition": {graph(steps, conns)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "no published template")
	require.Contains(t, page, `data-error-step="send_email_1"`)
	steps, conns = f.welcome("1 hour")
	res, page = f.submit("/dashboard/automations/new", "/dashboard/automations",
		url.Values{"name": {"Draft kept"}, "definition": {graph(steps, conns[:2])}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "no connection from the trigger reaches the step")
	require.Contains(t, page, `data-error-step="add_to_segment_1"`)
	res, page = f.submit("/dashboard/automations/new", "/dashboard/automations",
		url.Values{"name": {"Draft kept"}, "definition": {`{"steps": [`}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The steps could not be read")
	res, page = f.submit("/dashboard/automations/new", "/dashboard/automations",
		url.Values{"name": {" "}, "definition": {graph(f.welcome("1 hour"))}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "<code>name</code>")

	// On an automation that exists: refused, its saved version unchanged.
	steps, conns = f.welcome("1 hour")
	a, err := f.svc.Create(context.Background(), f.teamA, automations.AutomationInput{Name: ptr("Saved"), Steps: steps,
		Connections: conns, HasSteps: true, HasConnections: true})
	require.NoError(t, err)
	bad, _ := f.welcome("forever")
	res, page = f.submit("/dashboard/automations/"+a.ID.String(), "/dashboard/automations/"+a.ID.String(),
		url.Values{"name": {"Renamed"}, "definition": {graph(bad, conns)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, html.EscapeString(`step "delay_1"`))
	require.Contains(t, page, `value="Renamed"`)
	require.Contains(t, page, "forever")
	got, gotDef := f.load(a.ID)
	require.Equal(t, "Saved", got.Name)
	require.Equal(t, 1, got.Version)
	requireSameGraph(t, steps, conns, gotDef)
}

func ptr[T any](v T) *T { return &v }

// TestAutomationsTenantIsolation: another team's automation, its runs
// and its actions are not found.
func TestAutomationsTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newAutomationFixture(t)
	ctx := context.Background()
	teamB := uuid.MustParse(f.b.TeamID)
	steps := []automation.Step{step("trigger", automation.Trigger, `{"event_name":"b.event"}`),
		step("delay_1", automation.Delay, `{"duration":"1 hour"}`)}
	conns := []automation.Connection{{From: "trigger", To: "delay_1", Type: automation.Default}}
	enabled := store.AutomationEnabled
	b, err := f.svc.Create(ctx, teamB, automations.AutomationInput{Name: ptr("Team B's secret"), Status: &enabled,
		Steps: steps, Connections: conns, HasSteps: true, HasConnections: true})
	require.NoError(t, err)
	email := "b.contact@example.com"
	sent, err := f.svc.SendEvent(ctx, teamB, automations.SendInput{Event: "b.event", Email: &email})
	require.NoError(t, err)
	require.Len(t, sent.Runs, 1)
	runID := sent.Runs[0]

	_, page := f.page("/dashboard/automations")
	require.NotContains(t, page, "Team B")
	base := "/dashboard/automations/" + b.ID.String()
	for _, p := range []string{base, base + "/delete", base + "/runs", base + "/runs/" + runID.String()} {
		res, _ := f.page(p)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
	}
	for _, p := range []string{base, base + "/enable", base + "/stop", base + "/duplicate", base + "/delete"} {
		res, _ := f.submit("/dashboard/automations", p, url.Values{"name": {"Taken"}, "definition": {graph(steps, conns)}})
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
	}
	got, err := f.svc.Get(ctx, teamB, b.ID)
	require.NoError(t, err)
	require.Equal(t, "Team B's secret", got.Name)
	require.Equal(t, store.AutomationEnabled, got.Status)
	require.Equal(t, 1, got.Version)

	// Team A's own automation does not open team B's run either.
	mine, err := f.svc.Create(ctx, f.teamA, automations.AutomationInput{Name: ptr("Mine"),
		Steps: []automation.Step{step("trigger", automation.Trigger, `{"event_name":"b.event"}`)}, HasSteps: true})
	require.NoError(t, err)
	res, _ := f.page("/dashboard/automations/" + mine.ID.String() + "/runs/" + runID.String())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = f.page("/dashboard/automations/not-an-id")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// TestAutomationRuns lists an automation's runs with their filter and
// shows one: its contact, its steps with their output and error, and its
// workflow in the Temporal UI.
func TestAutomationRuns(t *testing.T) {
	t.Parallel()
	f := newAutomationFixture(t)
	ctx := context.Background()
	email := "runner@example.com"
	a, runID := f.started(email)
	// What the run's workflow records: the trigger passed, the email failed.
	_, err := f.store.Automations.RecordStep(ctx, store.StepRecord{RunID: runID, Key: "trigger", Seq: 0,
		Type: automation.Trigger, Status: "completed", Output: map[string]any{"event": "user.signed_up"}})
	require.NoError(t, err)
	_, err = f.store.Automations.RecordStep(ctx, store.StepRecord{RunID: runID, Key: "send_email_1", Seq: 1,
		Type: automation.SendEmail, Status: "failed", Error: map[string]any{"message": "the sender's domain is not verified"}})
	require.NoError(t, err)

	base := "/dashboard/automations/" + a.ID.String()
	res, page := f.page(base + "/runs")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `data-run="`+runID.String()+`"`)
	require.Contains(t, page, email)
	require.Contains(t, page, `<span class="badge wait">running</span>`)
	_, page = f.page(base + "/runs?status=running")
	require.Contains(t, page, runID.String())
	_, page = f.page(base + "/runs?status=completed")
	require.NotContains(t, page, `data-run="`)
	require.Contains(t, page, "No completed run.")
	_, page = f.page("/dashboard/automations")
	require.Contains(t, page, `data-runs="running">1<`)

	res, page = f.page(base + "/runs/" + runID.String())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Run for "+email)
	require.Contains(t, page, `id="run-status">running<`)
	require.Contains(t, page, `data-step="trigger" data-status="completed"`)
	require.Contains(t, page, `data-step="send_email_1" data-status="failed"`)
	require.Contains(t, page, html.EscapeString(`"event": "user.signed_up"`), "the output, indented")
	require.Contains(t, page, "the sender&#39;s domain is not verified")
	wf := automations.WorkflowID(runID)
	require.Contains(t, page, "<code>"+wf+"</code>")
	link := "http://ui.example:8233/namespaces/default/workflows?" +
		url.Values{"query": {`WorkflowId="` + wf + `"`}}.Encode()
	require.Contains(t, page, `href="`+html.EscapeString(link)+`"`)
	res, _ = f.page(base + "/runs/" + uuid.NewString())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = f.page(base + "/runs/nope")
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// Without a Temporal UI there is no link, the workflow ID still shown.
	g := newAutomationFixture(t, func(cfg *dashboard.Config) { cfg.TemporalUIURL = "" })
	a, runID = g.started(email)
	res, page = g.page("/dashboard/automations/" + a.ID.String() + "/runs/" + runID.String())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "<code>"+automations.WorkflowID(runID)+"</code>")
	require.NotContains(t, page, "Temporal UI")
	require.Contains(t, page, "No step taken yet.")
}

// started makes an enabled automation of team A and sends its event for
// the address: the run it starts (no workflow runs it in these tests).
func (f *automationFixture) started(email string) (store.Automation, uuid.UUID) {
	t := f.t
	ctx := context.Background()
	steps, conns := f.welcome("1 hour")
	enabled := store.AutomationEnabled
	a, err := f.svc.Create(ctx, f.teamA, automations.AutomationInput{Name: ptr("Welcome"), Status: &enabled,
		Steps: steps, Connections: conns, HasSteps: true, HasConnections: true})
	require.NoError(t, err)
	sent, err := f.svc.SendEvent(ctx, f.teamA, automations.SendInput{Event: "user.signed_up", Email: &email,
		Payload: json.RawMessage(`{"plan":"pro"}`)})
	require.NoError(t, err)
	require.Len(t, sent.Runs, 1)
	return a, sent.Runs[0]
}

// TestAutomationsHiddenWithoutService: no service, no page and no
// navigation entry.
func TestAutomationsHiddenWithoutService(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	res, _ := f.login(c, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, page := get(t, c, f.srv.URL+"/dashboard/team")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotContains(t, page, `href="/dashboard/automations"`)
	res, _ = get(t, c, f.srv.URL+"/dashboard/automations")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.False(t, strings.Contains(page, "Automations"))
}
