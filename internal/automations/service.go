// Package automations is the slice of custom events and automations: the
// events a team sends for its contacts ("user.signed_up"), the
// automations those events start (graphs of steps: delays, emails, waits
// for other events, conditions, contact changes), and their runs, each an
// AutomationRun workflow. Service is what the API and the dashboard call;
// Activities are the steps the workflow takes. The graph itself, its
// validation and the pure pieces of its interpretation are package
// workflows/automation.
package automations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows"
	"github.com/posthaste/posthaste/workflows/automation"
)

// WorkflowID is the ID of a run's AutomationRun workflow, as the Temporal
// UI finds it.
func WorkflowID(runID uuid.UUID) string { return workflows.AutomationRunWorkflowID(runID.String()) }

// Limits of the slice.
const (
	// MaxPayload is the largest event payload, as JSON.
	MaxPayload = 64 << 10
	// MaxSchemaFields is the most fields an event schema types.
	MaxSchemaFields = 100
	// MaxName is the longest automation name.
	MaxName = 200
)

// Schema field types (Resend's EventSchemaType).
var schemaTypes = map[string]bool{"string": true, "number": true, "boolean": true, "date": true}

// Service is the one way the API and the dashboard read and change a
// team's custom events, automations and runs. Bad input is an
// *invalid.Error naming the field (for a definition, the step); a row the
// team does not have is store.ErrNotFound.
type Service struct {
	st       *store.Automations
	audience *audience.Service
	contacts *store.Audience
	refs     Refs
}

// Refs checks the ids a definition's steps refer to: templates (published),
// segments and topics of the team. *store.Store's areas do (StoreRefs).
type Refs interface {
	TemplatePublished(ctx context.Context, teamID uuid.UUID, ref string) (bool, error)
	SegmentExists(ctx context.Context, teamID uuid.UUID, id uuid.UUID) (bool, error)
	TopicExists(ctx context.Context, teamID uuid.UUID, id uuid.UUID) (bool, error)
}

// NewService returns the Service over st.
func NewService(st *store.Store) *Service {
	return &Service{st: st.Automations, audience: audience.New(st.Audience), contacts: st.Audience, refs: StoreRefs{st}}
}

// ---- Events

// EventInput is the body of POST and PATCH /events.
type EventInput struct {
	Name   *string
	Schema json.RawMessage // absent or null: no schema
}

// checkSchema reads an event schema: field → type.
func checkSchema(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalid.Errorf("schema", "The `schema` field must map field names to \"string\", \"number\", "+
			"\"boolean\" or \"date\".")
	}
	if len(m) > MaxSchemaFields {
		return nil, invalid.Errorf("schema", "The `schema` field types at most %d fields.", MaxSchemaFields)
	}
	for k, t := range m {
		if k == "" || len(k) > 128 {
			return nil, invalid.Errorf("schema", "Schema field names are 1 to 128 characters.")
		}
		if !schemaTypes[t] {
			return nil, invalid.Errorf("schema", "Schema field %q has type %q; it must be \"string\", \"number\", "+
				"\"boolean\" or \"date\".", k, t)
		}
	}
	return m, nil
}

// CreateEvent defines a custom event: a name (not starting with
// "resend:") and an optional schema.
func (s *Service) CreateEvent(ctx context.Context, team uuid.UUID, in EventInput) (store.EventDefinition, error) {
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return store.EventDefinition{}, invalid.Missing("name")
	}
	if err := automation.ValidateEventName(*in.Name); err != nil {
		return store.EventDefinition{}, invalid.Errorf("name", "Invalid `name` field: %v.", err)
	}
	schema, err := checkSchema(in.Schema)
	if err != nil {
		return store.EventDefinition{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.EventDefinition{}, err
	}
	e, err := s.st.CreateEventDefinition(ctx, store.EventDefinition{ID: id, TeamID: team, Name: *in.Name, Schema: schema})
	if errors.Is(err, store.ErrConflict) {
		return e, invalid.Errorf("name", "An event named %q already exists.", *in.Name)
	}
	return e, err
}

// Event returns one of the team's events by id or name.
func (s *Service) Event(ctx context.Context, team uuid.UUID, ref string) (store.EventDefinition, error) {
	return s.st.EventDefinition(ctx, team, ref)
}

// ListEvents returns a page of the team's events.
func (s *Service) ListEvents(ctx context.Context, team uuid.UUID, p store.Page) ([]store.EventDefinition, bool, error) {
	return s.st.ListEventDefinitions(ctx, team, p)
}

// UpdateEvent replaces the schema of one of the team's events (null
// removes it).
func (s *Service) UpdateEvent(ctx context.Context, team uuid.UUID, ref string, in EventInput) (store.EventDefinition, error) {
	schema, err := checkSchema(in.Schema)
	if err != nil {
		return store.EventDefinition{}, err
	}
	return s.st.UpdateEventDefinition(ctx, team, ref, schema)
}

// DeleteEvent deletes one of the team's event definitions.
func (s *Service) DeleteEvent(ctx context.Context, team uuid.UUID, ref string) (store.EventDefinition, error) {
	return s.st.DeleteEventDefinition(ctx, team, ref)
}

// SendInput is the body of POST /events/send: the event, the contact (by
// id or by address: an address that is not a contact yet becomes one) and
// the payload (a JSON object).
type SendInput struct {
	Event     string
	ContactID *string
	Email     *string
	Payload   json.RawMessage
}

// Sent is what an event send did.
type Sent struct {
	ID        uuid.UUID
	Event     string
	ContactID uuid.UUID
	Runs      []uuid.UUID // the runs it started
}

// SendEvent accepts an event for a contact: it checks the payload against
// the event's schema, if it has one, creates the contact when an address
// is not one yet, and records the send, the runs it starts and the wakes
// of the contact's runs waiting for it in one transaction.
func (s *Service) SendEvent(ctx context.Context, team uuid.UUID, in SendInput) (Sent, error) {
	if strings.TrimSpace(in.Event) == "" {
		return Sent{}, invalid.Missing("event")
	}
	if err := automation.ValidateEventName(in.Event); err != nil {
		return Sent{}, invalid.Errorf("event", "Invalid `event` field: %v.", err)
	}
	hasID, hasEmail := in.ContactID != nil && *in.ContactID != "", in.Email != nil && *in.Email != ""
	if hasID == hasEmail {
		return Sent{}, invalid.Errorf("contact_id", "Give either `contact_id` or `email`, one of them.")
	}
	payload, fields, err := checkPayload(in.Payload)
	if err != nil {
		return Sent{}, err
	}
	def, err := s.st.EventDefinition(ctx, team, in.Event)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return Sent{}, err
	default:
		if err := matchSchema(def.Schema, fields); err != nil {
			return Sent{}, err
		}
	}
	var ct store.Contact
	if hasID {
		id, perr := uuid.Parse(*in.ContactID)
		if perr != nil {
			return Sent{}, invalid.Errorf("contact_id", "Invalid `contact_id` field: %q is not a contact id.", *in.ContactID)
		}
		if ct, err = s.contacts.Contact(ctx, team, store.ContactRef{ID: &id}); errors.Is(err, store.ErrNotFound) {
			return Sent{}, invalid.Errorf("contact_id", "The team has no contact %s.", id)
		}
	} else {
		ct, err = s.contactByAddress(ctx, team, *in.Email)
	}
	if err != nil {
		return Sent{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Sent{}, err
	}
	res, err := s.st.SendEvent(ctx, store.EventSend{ID: id, TeamID: team, Name: in.Event, ContactID: ct.ID, Payload: payload})
	if errors.Is(err, store.ErrNotFound) {
		// The contact was deleted in between.
		return Sent{}, invalid.Errorf("contact_id", "The contact was deleted.")
	}
	if err != nil {
		return Sent{}, err
	}
	return Sent{ID: id, Event: in.Event, ContactID: ct.ID, Runs: res.Started}, nil
}

// contactByAddress returns the team's contact with the address, creating
// it (contact.created) when there is none.
func (s *Service) contactByAddress(ctx context.Context, team uuid.UUID, email string) (store.Contact, error) {
	addr, err := audience.ContactAddress(email)
	if err != nil {
		return store.Contact{}, err
	}
	ct, err := s.contacts.Contact(ctx, team, store.ContactRef{Email: addr})
	if !errors.Is(err, store.ErrNotFound) {
		return ct, err
	}
	ct, err = s.audience.CreateContact(ctx, team, audience.ContactInput{Email: &addr})
	var taken *audience.AddressTakenError
	if errors.As(err, &taken) {
		// Created meanwhile by another request.
		return s.contacts.Contact(ctx, team, store.ContactRef{Email: addr})
	}
	return ct, err
}

// checkPayload reads a payload: a JSON object of at most MaxPayload bytes
// (absent or null: {}).
func checkPayload(raw json.RawMessage) (json.RawMessage, map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), map[string]any{}, nil
	}
	if len(raw) > MaxPayload {
		return nil, nil, invalid.Errorf("payload", "The `payload` field is larger than %d KB.", MaxPayload>>10)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, nil, invalid.Errorf("payload", "The `payload` field must be a JSON object.")
	}
	return raw, m, nil
}

// matchSchema checks the payload's fields against a schema: every field
// the schema types, when present (and not null), has its type; a "date" is
// an RFC 3339 time or a YYYY-MM-DD date. Fields the schema does not name
// pass.
func matchSchema(schema map[string]string, fields map[string]any) error {
	for k, typ := range schema {
		v, ok := fields[k]
		if !ok || v == nil {
			continue
		}
		good := false
		switch typ {
		case "string":
			_, good = v.(string)
		case "number":
			_, good = v.(float64)
		case "boolean":
			_, good = v.(bool)
		case "date":
			if str, isStr := v.(string); isStr {
				_, e1 := time.Parse(time.RFC3339, str)
				_, e2 := time.Parse(time.DateOnly, str)
				good = e1 == nil || e2 == nil
			}
		}
		if !good {
			return invalid.Errorf("payload", "Invalid `payload.%s` field: the event's schema types it %s.", k, article(typ))
		}
	}
	return nil
}

func article(typ string) string {
	if typ == "date" {
		return "a date (RFC 3339 or YYYY-MM-DD)"
	}
	return "a " + typ
}

// ---- Automations

// AutomationInput is the body of POST and PATCH /automations: nil fields
// are absent (on update: unchanged).
type AutomationInput struct {
	Name        *string
	Status      *string
	Steps       []automation.Step
	Connections []automation.Connection
	// HasSteps and HasConnections say that Steps and Connections were
	// given (an update may give one of them).
	HasSteps, HasConnections bool
}

func checkName(name *string) error {
	if name == nil || strings.TrimSpace(*name) == "" {
		return invalid.Missing("name")
	}
	if utf8.RuneCountInString(*name) > MaxName {
		return invalid.Errorf("name", "The `name` field is at most %d characters.", MaxName)
	}
	return nil
}

func checkStatus(status *string) error {
	if status != nil && *status != store.AutomationEnabled && *status != store.AutomationDisabled {
		return invalid.Errorf("status", "Invalid `status` field: %q; it is \"enabled\" or \"disabled\".", *status)
	}
	return nil
}

// checkDefinition validates a definition as a graph, then the templates,
// segments and topics its steps name.
func (s *Service) checkDefinition(ctx context.Context, team uuid.UUID, d automation.Definition) error {
	if err := d.Validate(); err != nil {
		var se *automation.StepError
		if errors.As(err, &se) {
			return invalid.Errorf("steps", "Invalid automation: %v.", err)
		}
		return err
	}
	for _, st := range d.Steps {
		if err := s.checkRefs(ctx, team, st); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) checkRefs(ctx context.Context, team uuid.UUID, st automation.Step) error {
	bad := func(format string, args ...any) error {
		return invalid.Errorf("steps", "Invalid automation: step %q: %s.", st.Key, fmt.Sprintf(format, args...))
	}
	switch st.Type {
	case automation.SendEmail:
		var c automation.SendEmailConfig
		_ = json.Unmarshal(st.Config, &c)
		ok, err := s.refs.TemplatePublished(ctx, team, c.Template.ID)
		if err != nil {
			return err
		}
		if !ok {
			return bad("the team has no published template %q", c.Template.ID)
		}
		if c.TopicID != nil && *c.TopicID != "" {
			id, err := uuid.Parse(*c.TopicID)
			if err != nil {
				return bad("topic_id %q is not a topic id", *c.TopicID)
			}
			if ok, err := s.refs.TopicExists(ctx, team, id); err != nil || !ok {
				if err != nil {
					return err
				}
				return bad("the team has no topic %s", id)
			}
		}
	case automation.AddToSegment:
		var c automation.AddToSegmentConfig
		_ = json.Unmarshal(st.Config, &c)
		id, err := uuid.Parse(c.SegmentID)
		if err != nil {
			return bad("segment_id %q is not a segment id", c.SegmentID)
		}
		if ok, err := s.refs.SegmentExists(ctx, team, id); err != nil || !ok {
			if err != nil {
				return err
			}
			return bad("the team has no segment %s", id)
		}
	}
	return nil
}

// Create stores a new automation (disabled unless Status says enabled)
// after validating its definition.
func (s *Service) Create(ctx context.Context, team uuid.UUID, in AutomationInput) (store.Automation, error) {
	if err := checkName(in.Name); err != nil {
		return store.Automation{}, err
	}
	if err := checkStatus(in.Status); err != nil {
		return store.Automation{}, err
	}
	if !in.HasSteps {
		return store.Automation{}, invalid.Missing("steps")
	}
	def := automation.Definition{Steps: in.Steps, Connections: in.Connections}
	if def.Connections == nil {
		def.Connections = []automation.Connection{}
	}
	if err := s.checkDefinition(ctx, team, def); err != nil {
		return store.Automation{}, err
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return store.Automation{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Automation{}, err
	}
	status := store.AutomationDisabled
	if in.Status != nil {
		status = *in.Status
	}
	return s.st.CreateAutomation(ctx, store.Automation{ID: id, TeamID: team, Name: strings.TrimSpace(*in.Name),
		Status: status, EventName: def.EventName(), Definition: raw})
}

// Get returns one of the team's automations.
func (s *Service) Get(ctx context.Context, team, id uuid.UUID) (store.Automation, error) {
	return s.st.AutomationByID(ctx, team, id)
}

// List returns a page of the team's automations, with status ("" any).
func (s *Service) List(ctx context.Context, team uuid.UUID, status string, p store.Page) ([]store.Automation, bool, error) {
	if status != "" {
		if err := checkStatus(&status); err != nil {
			return nil, false, err
		}
	}
	return s.st.ListAutomations(ctx, team, status, p)
}

// Update changes an automation's name, status and definition. A new
// definition (steps, connections or both) is validated and stored as a
// new version: runs in flight keep the version they started with.
// Disabling it cancels its running runs, as Stop does.
func (s *Service) Update(ctx context.Context, team, id uuid.UUID, in AutomationInput) (store.Automation, error) {
	if in.Name != nil {
		if err := checkName(in.Name); err != nil {
			return store.Automation{}, err
		}
		name := strings.TrimSpace(*in.Name)
		in.Name = &name
	}
	if err := checkStatus(in.Status); err != nil {
		return store.Automation{}, err
	}
	change := store.AutomationChange{Name: in.Name, Status: in.Status}
	if in.HasSteps || in.HasConnections {
		cur, err := s.st.AutomationByID(ctx, team, id)
		if err != nil {
			return store.Automation{}, err
		}
		var def automation.Definition
		if err := json.Unmarshal(cur.Definition, &def); err != nil {
			return store.Automation{}, fmt.Errorf("reading automation %s: %w", id, err)
		}
		if in.HasSteps {
			def.Steps = in.Steps
		}
		if in.HasConnections {
			def.Connections = in.Connections
		}
		if def.Connections == nil {
			def.Connections = []automation.Connection{}
		}
		if err := s.checkDefinition(ctx, team, def); err != nil {
			return store.Automation{}, err
		}
		if change.Definition, err = json.Marshal(def); err != nil {
			return store.Automation{}, err
		}
		event := def.EventName()
		change.EventName = &event
	}
	return s.st.UpdateAutomation(ctx, team, id, change)
}

// Stop disables an automation: no event starts it any more, and its
// running runs are cancelled (recorded as cancelled) and end at once.
func (s *Service) Stop(ctx context.Context, team, id uuid.UUID) (store.Automation, error) {
	disabled := store.AutomationDisabled
	return s.st.UpdateAutomation(ctx, team, id, store.AutomationChange{Status: &disabled})
}

// Duplicate copies an automation's current definition into a new,
// disabled automation named "<name> (copy)".
func (s *Service) Duplicate(ctx context.Context, team, id uuid.UUID) (store.Automation, error) {
	a, err := s.st.AutomationByID(ctx, team, id)
	if err != nil {
		return store.Automation{}, err
	}
	nid, err := uuid.NewV7()
	if err != nil {
		return store.Automation{}, err
	}
	name := a.Name + " (copy)"
	if utf8.RuneCountInString(name) > MaxName {
		name = string([]rune(name)[:MaxName])
	}
	return s.st.CreateAutomation(ctx, store.Automation{ID: nid, TeamID: team, Name: name,
		Status: store.AutomationDisabled, EventName: a.EventName, Definition: a.Definition})
}

// Delete deletes an automation and its runs' records; its running runs
// end at once, cancelled.
func (s *Service) Delete(ctx context.Context, team, id uuid.UUID) error {
	return s.st.DeleteAutomation(ctx, team, id)
}

// Runs returns a page of an automation's runs with one of statuses (none:
// any).
func (s *Service) Runs(ctx context.Context, team, id uuid.UUID, statuses []string, p store.Page) ([]store.AutomationRun, bool, error) {
	for _, st := range statuses {
		switch st {
		case store.RunRunning, store.RunCompleted, store.RunFailed, store.RunCancelled:
		default:
			return nil, false, invalid.Errorf("status", "Invalid `status` field: %q; it is one of running, completed, "+
				"failed and cancelled.", st)
		}
	}
	return s.st.ListAutomationRuns(ctx, team, id, statuses, p)
}

// Run returns one run of an automation with its steps.
func (s *Service) Run(ctx context.Context, team, automationID, runID uuid.UUID) (store.AutomationRun, error) {
	return s.st.AutomationRun(ctx, team, automationID, runID)
}
