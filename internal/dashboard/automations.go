package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/automation"
)

// automationsHandler serves the Automations pages: the list, the visual
// editor of an automation's steps and connections
// (assets/automation-editor.js) and its runs, through automations.Service,
// the API's.
type automationsHandler struct {
	*Handler
	svc *automations.Service
}

// routes adds the Automations pages when the dashboard has an automations
// service. Every write goes through signedIn (session and CSRF token) and
// automations.Service.
func (h *automationsHandler) routes(m *http.ServeMux) {
	if h.svc == nil {
		return
	}
	m.Handle("GET /dashboard/automations", h.signedIn(h.automations))
	m.Handle("POST /dashboard/automations", h.signedIn(h.createAutomation))
	m.Handle("GET /dashboard/automations/new", h.signedIn(h.newAutomation))
	m.Handle("GET /dashboard/automations/{id}", h.signedIn(h.automation))
	m.Handle("POST /dashboard/automations/{id}", h.signedIn(h.saveAutomation))
	m.Handle("POST /dashboard/automations/{id}/enable", h.signedIn(h.enableAutomation))
	m.Handle("POST /dashboard/automations/{id}/stop", h.signedIn(h.stopAutomation))
	m.Handle("POST /dashboard/automations/{id}/duplicate", h.signedIn(h.duplicateAutomation))
	m.Handle("GET /dashboard/automations/{id}/delete", h.signedIn(h.deleteAutomationPage))
	m.Handle("POST /dashboard/automations/{id}/delete", h.signedIn(h.deleteAutomation))
	m.Handle("GET /dashboard/automations/{id}/runs", h.signedIn(h.runs))
	m.Handle("GET /dashboard/automations/{id}/runs/{run_id}", h.signedIn(h.run))
}

// runStatuses are the statuses of a run, in the order the pages show them.
var runStatuses = []string{store.RunRunning, store.RunCompleted, store.RunFailed, store.RunCancelled}

// automationBadge is the CSS class of an automation status's badge.
func automationBadge(status string) string {
	if status == store.AutomationEnabled {
		return "ok"
	}
	return "neutral"
}

// runBadge is the CSS class of the badge of a run's or a step's status.
func runBadge(status string) string {
	switch status {
	case store.RunCompleted:
		return "ok"
	case store.RunFailed:
		return "bad"
	case store.RunRunning, "waiting", "pending":
		return "wait"
	}
	return "neutral"
}

// stepLabels name the step types as the editor does.
var stepLabels = map[string]string{
	automation.Trigger: "Trigger", automation.Delay: "Delay", automation.SendEmail: "Send email",
	automation.WaitForEvent: "Wait for event", automation.Condition: "Condition",
	automation.ContactUpdate: "Update contact", automation.ContactDelete: "Delete contact",
	automation.AddToSegment: "Add to segment",
}

func stepLabel(typ string) string {
	if l, ok := stepLabels[typ]; ok {
		return l
	}
	return typ
}

// automationRow is an automation of the list.
type automationRow struct{ store.Automation }

// Badge is the CSS class of the row's status badge.
func (r automationRow) Badge() string { return automationBadge(r.Status) }

// Count is the number of the automation's runs with status.
func (r automationRow) Count(status string) int { return r.Runs[status] }

// Enabled says whether events start runs of it.
func (r automationRow) Enabled() bool { return r.Status == store.AutomationEnabled }

type automationsData struct {
	Automations []automationRow
	Status      string // the list's filter, "" for any
	Statuses    []string
	Pager       pager
	Notice      string
	Error       formError
}

var automationNotices = map[string]string{
	"created":    "Automation saved. It is disabled: enable it and the events of its trigger start runs.",
	"saved":      "Automation saved. Runs already under way keep the version they started with.",
	"enabled":    "Enabled: each event of its trigger now starts a run for its contact.",
	"stopped":    "Stopped: no event starts it any more, and its running runs were cancelled.",
	"duplicated": "This is a copy, disabled until you enable it.",
	"deleted":    "Automation deleted.",
}

func (h *automationsHandler) automations(w http.ResponseWriter, r *http.Request, se *store.Session) {
	q := r.URL.Query()
	d := automationsData{Statuses: []string{store.AutomationEnabled, store.AutomationDisabled},
		Notice: automationNotices[q.Get("done")]}
	if s := q.Get("status"); slices.Contains(d.Statuses, s) {
		d.Status = s
	}
	p := pageOf(q, 50)
	list, more, err := h.svc.List(r.Context(), se.TeamID, d.Status, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, a := range list {
		d.Automations = append(d.Automations, automationRow{a})
	}
	if len(list) > 0 {
		d.Pager = statusPager(d.Status, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, http.StatusOK, "automations", view{Title: "Automations", Nav: "automations", Session: se,
		CSRF: se.CSRFToken, Data: d})
}

// automationForm is what the editor posts: the name and the graph, the
// JSON of {"steps": [...], "connections": [...]} as the API takes them,
// which the editor's script keeps in step with its boxes.
type automationForm struct {
	Name, Definition string
}

// starterDefinition is the graph of a new automation: its trigger alone.
const starterDefinition = `{
  "steps": [
    {"key": "trigger", "type": "trigger", "config": {"event_name": ""}}
  ],
  "connections": []
}`

// formOfAutomation is the editor's form showing a.
func formOfAutomation(a store.Automation) automationForm {
	var b bytes.Buffer
	def := string(a.Definition)
	if json.Indent(&b, a.Definition, "", "  ") == nil {
		def = b.String()
	}
	return automationForm{Name: a.Name, Definition: def}
}

func automationFormOf(r *http.Request) automationForm {
	return automationForm{Name: r.PostFormValue("name"), Definition: r.PostFormValue("definition")}
}

// input is the form as the service's input: the name and the whole graph
// (both steps and connections given). A definition that is not the JSON
// of a graph is a field error of its own.
func (f automationForm) input() (automations.AutomationInput, error) {
	name := f.Name
	in := automations.AutomationInput{Name: &name, HasSteps: true, HasConnections: true}
	var def struct {
		Steps       []automation.Step       `json:"steps"`
		Connections []automation.Connection `json:"connections"`
	}
	dec := json.NewDecoder(strings.NewReader(f.Definition))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return in, invalid.Errorf("definition", "The steps could not be read: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
	in.Steps, in.Connections = def.Steps, def.Connections
	if in.Connections == nil {
		in.Connections = []automation.Connection{}
	}
	return in, nil
}

// automationPicker is a template, segment or topic the editor offers.
type automationPicker struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// automationData is what the editor shows.
type automationData struct {
	// Automation is nil for a new one.
	Automation *store.Automation
	Form       automationForm
	// Templates (published ones), Segments and Topics are JSON arrays of
	// automationPicker for the editor's selects; Events the names of the
	// team's events, which the event fields suggest.
	Templates, Segments, Topics string
	Events                      []string
	Notice                      string
	Error                       formError
	// ErrorStep is the key of the step Error names, "" when none.
	ErrorStep string
}

// Badge is the CSS class of the automation's status badge.
func (d automationData) Badge() string {
	if d.Automation == nil {
		return "neutral"
	}
	return automationBadge(d.Automation.Status)
}

// Enabled says whether the automation exists and is enabled.
func (d automationData) Enabled() bool {
	return d.Automation != nil && d.Automation.Status == store.AutomationEnabled
}

// Running is the number of the automation's running runs.
func (d automationData) Running() int {
	if d.Automation == nil {
		return 0
	}
	return d.Automation.Runs[store.RunRunning]
}

// Total is the number of the automation's runs.
func (d automationData) Total() int {
	n := 0
	if d.Automation != nil {
		for _, c := range d.Automation.Runs {
			n += c
		}
	}
	return n
}

// maxPickers bounds the templates, segments, topics and events the editor
// offers.
const maxPickers = 100

// pickers fills what the editor's selects offer.
func (h *automationsHandler) pickers(ctx context.Context, team uuid.UUID, d *automationData) error {
	tpls, _, err := h.cfg.Templates.List(ctx, team, store.Page{Limit: maxPickers})
	if err != nil {
		return err
	}
	var list []automationPicker
	for _, t := range tpls {
		if t.Published != nil {
			list = append(list, automationPicker{ID: t.ID.String(), Name: t.Name})
		}
	}
	d.Templates = pickerJSON(list)
	segs, _, err := h.cfg.Audience.ListSegments(ctx, team, store.Page{Limit: maxPickers})
	if err != nil {
		return err
	}
	list = nil
	for _, s := range segs {
		list = append(list, automationPicker{ID: s.ID.String(), Name: s.Name})
	}
	d.Segments = pickerJSON(list)
	topics, _, err := h.cfg.Audience.ListTopics(ctx, team, store.Page{Limit: maxPickers})
	if err != nil {
		return err
	}
	list = nil
	for _, t := range topics {
		list = append(list, automationPicker{ID: t.ID.String(), Name: t.Name})
	}
	d.Topics = pickerJSON(list)
	events, _, err := h.svc.ListEvents(ctx, team, store.Page{Limit: maxPickers})
	if err != nil {
		return err
	}
	for _, e := range events {
		d.Events = append(d.Events, e.Name)
	}
	slices.Sort(d.Events)
	return nil
}

func pickerJSON(list []automationPicker) string {
	if list == nil {
		list = []automationPicker{}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// stepKeyRE finds the step an error of the service names.
var stepKeyRE = regexp.MustCompile(`step "([^"]+)"`)

// automationError is the form error of an automation write, and the key
// of the step it names.
func automationError(err error) (formError, string, bool) {
	fe, ok := asFormError(err)
	if !ok {
		return fe, "", false
	}
	step := ""
	if m := stepKeyRE.FindStringSubmatch(fe.Message); m != nil {
		step = m[1]
	}
	return fe, step, true
}

func (h *automationsHandler) renderAutomation(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d automationData) {
	if err := h.pickers(r.Context(), se.TeamID, &d); err != nil {
		h.fail(w, r, err)
		return
	}
	title := "New automation"
	if d.Automation != nil {
		title = d.Automation.Name
	}
	h.render(w, status, "automation", view{Title: title, Nav: "automations", Session: se, CSRF: se.CSRFToken, Data: d})
}

func (h *automationsHandler) newAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderAutomation(w, r, se, http.StatusOK, automationData{Form: automationForm{Name: "Untitled automation",
		Definition: starterDefinition}})
}

// formStatus is the status the editor's Save and enable button posts.
func formStatus(r *http.Request) *string {
	if r.PostFormValue("status") == store.AutomationEnabled {
		s := store.AutomationEnabled
		return &s
	}
	return nil
}

// createAutomation stores the editor's new automation, or shows the
// draft again with the reason it is refused.
func (h *automationsHandler) createAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	f := automationFormOf(r)
	in, err := f.input()
	if err == nil {
		in.Status = formStatus(r)
		var a store.Automation
		if a, err = h.svc.Create(r.Context(), se.TeamID, in); err == nil {
			done := "created"
			if a.Status == store.AutomationEnabled {
				done = "enabled"
			}
			http.Redirect(w, r, "/dashboard/automations/"+a.ID.String()+"?done="+done, http.StatusSeeOther)
			return
		}
	}
	fe, step, ok := automationError(err)
	if !ok {
		h.fail(w, r, err)
		return
	}
	h.renderAutomation(w, r, se, http.StatusUnprocessableEntity, automationData{Form: f, Error: fe, ErrorStep: step})
}

func (h *automationsHandler) loadAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Automation, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Automation, error) {
		return h.svc.Get(r.Context(), se.TeamID, id)
	})
}

func (h *automationsHandler) automation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	a, ok := h.loadAutomation(w, r, se)
	if !ok {
		return
	}
	h.renderAutomation(w, r, se, http.StatusOK, automationData{Automation: &a, Form: formOfAutomation(a),
		Notice: automationNotices[r.URL.Query().Get("done")]})
}

// saveAutomation stores the editor's graph as the automation's new
// version, or shows the draft again with the reason it is refused.
func (h *automationsHandler) saveAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	a, ok := h.loadAutomation(w, r, se)
	if !ok {
		return
	}
	f := automationFormOf(r)
	in, err := f.input()
	if err == nil {
		in.Status = formStatus(r)
		var saved store.Automation
		if saved, err = h.svc.Update(r.Context(), se.TeamID, a.ID, in); err == nil {
			done := "saved"
			if in.Status != nil && a.Status != store.AutomationEnabled && saved.Status == store.AutomationEnabled {
				done = "enabled"
			}
			http.Redirect(w, r, "/dashboard/automations/"+a.ID.String()+"?done="+done, http.StatusSeeOther)
			return
		}
	}
	fe, step, isForm := automationError(err)
	if !isForm {
		h.failOr404(w, r, err)
		return
	}
	h.renderAutomation(w, r, se, http.StatusUnprocessableEntity, automationData{Automation: &a, Form: f, Error: fe,
		ErrorStep: step})
}

// back is where a status change returns: the list when its form came from
// there (from=list), else the automation's editor.
func back(r *http.Request, id uuid.UUID, done string) string {
	if r.PostFormValue("from") == "list" {
		return "/dashboard/automations?done=" + done
	}
	return "/dashboard/automations/" + id.String() + "?done=" + done
}

func (h *automationsHandler) enableAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	enabled := store.AutomationEnabled
	a, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Automation, error) {
		return h.svc.Update(r.Context(), se.TeamID, id, automations.AutomationInput{Status: &enabled})
	})
	if !ok {
		return
	}
	http.Redirect(w, r, back(r, a.ID, "enabled"), http.StatusSeeOther)
}

func (h *automationsHandler) stopAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	a, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Automation, error) {
		return h.svc.Stop(r.Context(), se.TeamID, id)
	})
	if !ok {
		return
	}
	http.Redirect(w, r, back(r, a.ID, "stopped"), http.StatusSeeOther)
}

func (h *automationsHandler) duplicateAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	a, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Automation, error) {
		return h.svc.Duplicate(r.Context(), se.TeamID, id)
	})
	if !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/automations/"+a.ID.String()+"?done=duplicated", http.StatusSeeOther)
}

func (h *automationsHandler) deleteAutomationPage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	a, ok := h.loadAutomation(w, r, se)
	if !ok {
		return
	}
	h.render(w, http.StatusOK, "automation_delete", view{Title: "Delete " + a.Name, Nav: "automations", Session: se,
		CSRF: se.CSRFToken, Data: automationData{Automation: &a}})
}

func (h *automationsHandler) deleteAutomation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if _, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (struct{}, error) {
		return struct{}{}, h.svc.Delete(r.Context(), se.TeamID, id)
	}); !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/automations?done=deleted", http.StatusSeeOther)
}

// runsData is the page of an automation's runs.
type runsData struct {
	Automation store.Automation
	Runs       []runRow
	Status     string // the filter, "" for any
	Statuses   []string
	Pager      pager
}

func (h *automationsHandler) runs(w http.ResponseWriter, r *http.Request, se *store.Session) {
	a, ok := h.loadAutomation(w, r, se)
	if !ok {
		return
	}
	q := r.URL.Query()
	d := runsData{Automation: a, Statuses: runStatuses}
	var statuses []string
	if s := q.Get("status"); slices.Contains(runStatuses, s) {
		d.Status, statuses = s, []string{s}
	}
	p := pageOf(q, 50)
	list, more, err := h.svc.Runs(r.Context(), se.TeamID, a.ID, statuses, p)
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	for _, run := range list {
		d.Runs = append(d.Runs, runRow{run})
	}
	if len(list) > 0 {
		d.Pager = statusPager(d.Status, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, http.StatusOK, "automation_runs", view{Title: "Runs of " + a.Name, Nav: "automations", Session: se,
		CSRF: se.CSRFToken, Data: d})
}

// runRow is a run of the list.
type runRow struct{ store.AutomationRun }

// Badge is the CSS class of the run's status badge.
func (r runRow) Badge() string { return runBadge(r.Status) }

// runStepRow is a step a run visited, its output and error indented.
type runStepRow struct {
	store.AutomationRunStep
	Label, OutputText, ErrorText string
	// EmailID is the email a send_email step sent, "" when none.
	EmailID string
}

// Badge is the CSS class of the step's status badge.
func (s runStepRow) Badge() string { return runBadge(s.Status) }

// runData is the page of one run.
type runData struct {
	Automation  store.Automation
	Run         store.AutomationRun
	Steps       []runStepRow
	WorkflowID  string
	WorkflowURL string
}

// Badge is the CSS class of the run's status badge.
func (d runData) Badge() string { return runBadge(d.Run.Status) }

// prettyJSON indents a JSON value; "" for none or null.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

func (h *automationsHandler) run(w http.ResponseWriter, r *http.Request, se *store.Session) {
	a, ok := h.loadAutomation(w, r, se)
	if !ok {
		return
	}
	runID, err := uuid.Parse(r.PathValue("run_id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	run, err := h.svc.Run(r.Context(), se.TeamID, a.ID, runID)
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	d := runData{Automation: a, Run: run, WorkflowID: automations.WorkflowID(run.ID)}
	for _, st := range run.Steps {
		row := runStepRow{AutomationRunStep: st, Label: stepLabel(st.Type), OutputText: prettyJSON(st.Output),
			ErrorText: prettyJSON(st.Error)}
		if st.Type == automation.SendEmail {
			var out struct {
				EmailID string `json:"email_id"`
			}
			if json.Unmarshal(st.Output, &out) == nil && uuid.Validate(out.EmailID) == nil {
				row.EmailID = out.EmailID
			}
		}
		d.Steps = append(d.Steps, row)
	}
	if h.cfg.TemporalUIURL != "" {
		query := url.Values{"query": {fmt.Sprintf("WorkflowId=%q", d.WorkflowID)}}
		d.WorkflowURL = strings.TrimRight(h.cfg.TemporalUIURL, "/") + "/namespaces/" +
			url.PathEscape(h.cfg.Namespace) + "/workflows?" + query.Encode()
	}
	h.render(w, http.StatusOK, "automation_run", view{Title: "Run of " + a.Name, Nav: "automations", Session: se,
		CSRF: se.CSRFToken, Data: d})
}

// statusPager is the pager of a list filtered by status ("" for none),
// which its links keep.
func statusPager(status string, p store.Page, more bool, first, last uuid.UUID, n int) pager {
	keep := url.Values{}
	if status != "" {
		keep.Set("status", status)
	}
	return pagerOf(keep, p, more, first, last, n)
}
