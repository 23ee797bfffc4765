package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/automation"
)

// automationsAPI serves /events and /automations (Resend's custom events
// and automations).
type automationsAPI struct {
	*Server
	svc *automations.Service
}

// ---- /events

type eventJSON struct {
	Object    string            `json:"object"`
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Schema    map[string]string `json:"schema"`
	CreatedAt string            `json:"created_at"`
	UpdatedAt *string           `json:"updated_at"`
}

func renderEvent(e store.EventDefinition) eventJSON {
	return eventJSON{Object: "event", ID: e.ID.String(), Name: e.Name, Schema: e.Schema,
		CreatedAt: formatTime(e.CreatedAt), UpdatedAt: formatTimePtr(e.UpdatedAt)}
}

type eventRequest struct {
	Name   *string         `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

const eventMissing = "Event not found."

func (s *automationsAPI) createEvent(c *gin.Context) {
	var req eventRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	e, err := s.svc.CreateEvent(c.Request.Context(), principal(c).TeamID,
		automations.EventInput{Name: req.Name, Schema: req.Schema})
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusCreated, gin.H{"object": "event", "id": e.ID.String()})
}

func (s *automationsAPI) listEvents(c *gin.Context) {
	respondList(s.Server, c, paged, s.svc.ListEvents, renderEvent)
}

func (s *automationsAPI) getEvent(c *gin.Context) {
	e, err := s.svc.Event(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	if err != nil {
		s.respondError(c, notFound(err, eventMissing))
		return
	}
	c.PureJSON(http.StatusOK, renderEvent(e))
}

func (s *automationsAPI) updateEvent(c *gin.Context) {
	var req eventRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	e, err := s.svc.UpdateEvent(c.Request.Context(), principal(c).TeamID, c.Param("id"),
		automations.EventInput{Schema: req.Schema})
	if err != nil {
		s.respondError(c, notFound(err, eventMissing))
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "event", "id": e.ID.String()})
}

func (s *automationsAPI) deleteEvent(c *gin.Context) {
	e, err := s.svc.DeleteEvent(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	if err != nil {
		s.respondError(c, notFound(err, eventMissing))
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "event", "id": e.ID.String(), "deleted": true})
}

type sendEventRequest struct {
	Event     string          `json:"event"`
	ContactID *string         `json:"contact_id"`
	Email     *string         `json:"email"`
	Payload   json.RawMessage `json:"payload"`
}

// sendEvent is POST /events/send. Resend answers {object, event}; the id
// of the send is Posthaste's, as are the contact and the runs it started.
func (s *automationsAPI) sendEvent(c *gin.Context) {
	var req sendEventRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	sent, err := s.svc.SendEvent(c.Request.Context(), principal(c).TeamID, automations.SendInput{
		Event: req.Event, ContactID: req.ContactID, Email: req.Email, Payload: req.Payload})
	if err != nil {
		s.respondError(c, err)
		return
	}
	runs := make([]string, len(sent.Runs))
	for i, r := range sent.Runs {
		runs[i] = r.String()
	}
	c.PureJSON(http.StatusAccepted, gin.H{"object": "event", "id": sent.ID.String(), "event": sent.Event,
		"contact_id": sent.ContactID.String(), "runs": runs})
}

// ---- /automations

type automationJSON struct {
	Object    string         `json:"object"`
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Status    string         `json:"status"`
	CreatedAt string         `json:"created_at"`
	UpdatedAt *string        `json:"updated_at"`
	Runs      map[string]int `json:"runs"`
}

// automationFullJSON is a single automation: with its steps and
// connections, always present (empty lists included).
type automationFullJSON struct {
	automationJSON
	Steps       []automation.Step       `json:"steps"`
	Connections []automation.Connection `json:"connections"`
}

func renderAutomation(a store.Automation) automationJSON {
	runs := map[string]int{store.RunRunning: 0, store.RunCompleted: 0, store.RunFailed: 0, store.RunCancelled: 0}
	for k, n := range a.Runs {
		runs[k] = n
	}
	return automationJSON{Object: "automation", ID: a.ID.String(), Name: a.Name, Status: a.Status,
		CreatedAt: formatTime(a.CreatedAt), UpdatedAt: formatTimePtr(a.UpdatedAt), Runs: runs}
}

func renderAutomationFull(a store.Automation) automationFullJSON {
	out := automationFullJSON{automationJSON: renderAutomation(a)}
	var def automation.Definition
	_ = json.Unmarshal(a.Definition, &def)
	out.Steps, out.Connections = def.Steps, def.Connections
	if out.Steps == nil {
		out.Steps = []automation.Step{}
	}
	if out.Connections == nil {
		out.Connections = []automation.Connection{}
	}
	for i, c := range out.Connections {
		if c.Type == "" {
			out.Connections[i].Type = automation.Default
		}
	}
	return out
}

// automationRequest is the body of POST and PATCH /automations, in the
// snake_case Resend's SDK sends.
type automationRequest struct {
	Name        *string                 `json:"name"`
	Status      *string                 `json:"status"`
	Steps       []automation.Step       `json:"steps"`
	Connections []automation.Connection `json:"connections"`
}

func (s *automationsAPI) decodeAutomation(c *gin.Context) (automations.AutomationInput, error) {
	body, err := readBody(c)
	if err != nil {
		return automations.AutomationInput{}, err
	}
	var present map[string]json.RawMessage
	_ = json.Unmarshal(body, &present)
	var req automationRequest
	if err := decodeJSON(c, &req); err != nil {
		return automations.AutomationInput{}, err
	}
	has := func(k string) bool { v, ok := present[k]; return ok && string(v) != "null" }
	return automations.AutomationInput{Name: req.Name, Status: req.Status, Steps: req.Steps,
		Connections: req.Connections, HasSteps: has("steps"), HasConnections: has("connections")}, nil
}

const automationMissing = "Automation not found."

func (s *automationsAPI) createAutomation(c *gin.Context) {
	in, err := s.decodeAutomation(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	a, err := s.svc.Create(c.Request.Context(), principal(c).TeamID, in)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusCreated, gin.H{"object": "automation", "id": a.ID.String()})
}

func (s *automationsAPI) listAutomations(c *gin.Context) {
	status := c.Query("status")
	respondList(s.Server, c, paged, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.Automation, bool, error) {
		return s.svc.List(ctx, team, status, p)
	}, renderAutomation)
}

func (s *automationsAPI) getAutomation(c *gin.Context) {
	respondOne(s.Server, c, s.svc.Get, automationMissing, renderAutomationFull)
}

func (s *automationsAPI) updateAutomation(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	in, err := s.decodeAutomation(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	a, err := s.svc.Update(c.Request.Context(), principal(c).TeamID, id, in)
	if err != nil {
		s.respondError(c, notFound(err, automationMissing))
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "automation", "id": a.ID.String()})
}

func (s *automationsAPI) duplicateAutomation(c *gin.Context) {
	respondOne(s.Server, c, s.svc.Duplicate, automationMissing, func(a store.Automation) gin.H {
		return gin.H{"object": "automation", "id": a.ID.String()}
	})
}

func (s *automationsAPI) stopAutomation(c *gin.Context) {
	respondOne(s.Server, c, s.svc.Stop, automationMissing, func(a store.Automation) gin.H {
		return gin.H{"object": "automation", "id": a.ID.String(), "status": a.Status}
	})
}

func (s *automationsAPI) deleteAutomation(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	if err := s.svc.Delete(c.Request.Context(), principal(c).TeamID, id); err != nil {
		s.respondError(c, notFound(err, automationMissing))
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "automation", "id": id.String(), "deleted": true})
}

// ---- /automations/:id/runs

type runStepJSON struct {
	Key         string          `json:"key"`
	Type        string          `json:"type"`
	Status      string          `json:"status"`
	Output      json.RawMessage `json:"output"`
	Error       json.RawMessage `json:"error"`
	StartedAt   *string         `json:"started_at"`
	CompletedAt *string         `json:"completed_at"`
	CreatedAt   string          `json:"created_at"`
	Iteration   int             `json:"iteration"`
}

type runJSON struct {
	Object      string  `json:"object"`
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
	CreatedAt   string  `json:"created_at"`
	ContactID   *string `json:"contact_id"`
	EventID     string  `json:"event_id"`
	Version     int     `json:"version"`
	Error       *string `json:"error"`
	WorkflowID  string  `json:"workflow_id"`
}

// runFullJSON is a single run: with its steps, always present (an empty
// list before its first step).
type runFullJSON struct {
	runJSON
	Steps []runStepJSON `json:"steps"`
}

func renderRun(r store.AutomationRun) runJSON {
	var contact *string
	if r.ContactID != nil {
		id := r.ContactID.String()
		contact = &id
	}
	return runJSON{Object: "automation_run", ID: r.ID.String(), Status: r.Status, StartedAt: formatTimePtr(r.StartedAt),
		CompletedAt: formatTimePtr(r.CompletedAt), CreatedAt: formatTime(r.CreatedAt), ContactID: contact,
		EventID: r.EventID.String(), Version: r.Version, Error: r.Error,
		WorkflowID: automations.WorkflowID(r.ID)}
}

func nullJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func renderRunFull(r store.AutomationRun) runFullJSON {
	out := runFullJSON{runJSON: renderRun(r)}
	out.Steps = make([]runStepJSON, len(r.Steps))
	for i, st := range r.Steps {
		out.Steps[i] = runStepJSON{Key: st.Key, Type: st.Type, Status: st.Status, Output: nullJSON(st.Output),
			Error: nullJSON(st.Error), StartedAt: formatTimePtr(st.StartedAt), CompletedAt: formatTimePtr(st.CompletedAt),
			CreatedAt: formatTime(st.CreatedAt), Iteration: st.Iteration}
	}
	return out
}

func (s *automationsAPI) listRuns(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var statuses []string
	if v := c.Query("status"); v != "" {
		statuses = strings.Split(v, ",")
	}
	respondList(s.Server, c, paged, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.AutomationRun, bool, error) {
		runs, more, err := s.svc.Runs(ctx, team, id, statuses, p)
		return runs, more, notFound(err, automationMissing)
	}, renderRun)
}

func (s *automationsAPI) getRun(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	run, err := uuid.Parse(c.Param("run_id"))
	if err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameInvalidParameter, "The run id must be a valid UUID."))
		return
	}
	r, err := s.svc.Run(c.Request.Context(), principal(c).TeamID, id, run)
	if err != nil {
		s.respondError(c, notFound(err, "Automation run not found."))
		return
	}
	c.PureJSON(http.StatusOK, renderRunFull(r))
}
