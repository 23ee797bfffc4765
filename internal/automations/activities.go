package automations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/workflows/automation"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Activities are the activities of the AutomationRun workflow. Each
// records what it did in the run's step rows, by run, step and visit, so
// a retried activity repeats nothing: an email is sent under an
// idempotency key made of the three.
type Activities struct {
	st       *store.Automations
	contacts *store.Audience
	insights *store.Insights
	audience *audience.Service
	submit   *submit.Service
}

// NewActivities returns the activities over st, sending through sub (the
// same send path as the API's).
func NewActivities(st *store.Store, sub *submit.Service) *Activities {
	return &Activities{st: st.Automations, contacts: st.Audience, insights: st.Insights,
		audience: audience.New(st.Audience), submit: sub}
}

// LoadAutomationRun returns the definition of the version the run started
// with and its status (cancelled when its automation was deleted).
func (a *Activities) LoadAutomationRun(ctx context.Context, in contract.AutomationRunRef) (contract.AutomationRunPlan, error) {
	r, raw, err := a.st.RunPlan(ctx, in.RunID, true)
	if errors.Is(err, store.ErrNotFound) {
		return contract.AutomationRunPlan{Status: contract.RunCancelled}, nil
	}
	if err != nil {
		return contract.AutomationRunPlan{}, err
	}
	plan := contract.AutomationRunPlan{TeamID: r.TeamID, AutomationID: r.AutomationID, Version: r.Version, Status: r.Status}
	if err := json.Unmarshal(raw, &plan.Definition); err != nil {
		return contract.AutomationRunPlan{}, contract.Permanent(fmt.Errorf("reading run %s's definition: %w", in.RunID, err))
	}
	return plan, nil
}

// FinishAutomationRun ends a run that is still running, with the step
// it completed without a call of its own (in.Done).
func (a *Activities) FinishAutomationRun(ctx context.Context, in contract.AutomationFinishInput) error {
	if in.Done == nil {
		return a.st.FinishRun(ctx, in.RunID, in.Status, in.Error)
	}
	s, res, err := a.load(ctx, contract.AutomationStepInput{RunID: in.RunID})
	if err != nil || res.Cancelled {
		return err
	}
	_, err = a.st.RecordSteps(ctx, []store.StepRecord{s.doneRecord(*in.Done)},
		&store.RunEnd{Status: in.Status, Error: in.Error})
	return err
}

// stepRun is one visit of a step with what the activity knows of its run.
type stepRun struct {
	in   contract.AutomationStepInput
	run  store.AutomationRun
	def  automation.Definition
	step automation.Step
	// pending is the record of in.Done until it is written.
	pending *store.StepRecord
}

func (s *stepRun) record(status string, output, failure any) store.StepRecord {
	return store.StepRecord{RunID: s.in.RunID, Key: s.in.Key, Iteration: s.in.Iteration, Seq: s.in.Seq,
		Type: s.step.Type, Status: status, Output: output, Error: failure}
}

// doneRecord is the record of a step completed without a call of its
// own: a trigger names the run's event, a wait that timed out says so.
func (s *stepRun) doneRecord(d contract.AutomationStepDone) store.StepRecord {
	step, _ := s.def.Step(d.Key)
	out := map[string]any{}
	switch {
	case step.Type == automation.Trigger:
		out["event_id"] = s.run.EventID
	case d.Outcome == automation.Timeout:
		out["timed_out"] = true
	}
	return store.StepRecord{RunID: s.in.RunID, Key: d.Key, Iteration: d.Iteration, Seq: d.Seq, Type: step.Type,
		Status: "completed", Output: out}
}

// errOutput is the `error` object of a failed step.
func errOutput(msg string) map[string]any { return map[string]any{"message": msg} }

// load reads the run of in and the definition it started with; res says
// Cancelled when the run is gone or no longer running.
func (a *Activities) load(ctx context.Context, in contract.AutomationStepInput) (*stepRun, contract.AutomationStepResult, error) {
	run, raw, err := a.st.RunPlan(ctx, in.RunID, false)
	if errors.Is(err, store.ErrNotFound) {
		return nil, contract.AutomationStepResult{Cancelled: true}, nil
	}
	if err != nil {
		return nil, contract.AutomationStepResult{}, err
	}
	if run.Status != store.RunRunning {
		return nil, contract.AutomationStepResult{Cancelled: true}, nil
	}
	s := &stepRun{in: in, run: run}
	if err := json.Unmarshal(raw, &s.def); err != nil {
		return nil, contract.AutomationStepResult{}, contract.Permanent(err)
	}
	return s, contract.AutomationStepResult{}, nil
}

// RunAutomationStep takes one phase of one visit of a step (see the
// contract.Phase… constants), after recording the step the run completed
// without a call of its own (in.Done); with in.EndRun, the call of the
// run's last step ends the run.
func (a *Activities) RunAutomationStep(ctx context.Context, in contract.AutomationStepInput) (contract.AutomationStepResult, error) {
	s, res, err := a.load(ctx, in)
	if s == nil {
		return res, err
	}
	if in.Done != nil {
		rec := s.doneRecord(*in.Done)
		s.pending = &rec
	}
	res, err = a.runStep(ctx, s)
	if err != nil || res.Cancelled || s.pending == nil {
		return res, err
	}
	// The phase recorded nothing (a check that found no event, a step
	// that does not exist): the step before it is recorded alone.
	running, err := a.st.RecordSteps(ctx, []store.StepRecord{*s.pending}, nil)
	if err != nil {
		return contract.AutomationStepResult{}, err
	}
	if !running {
		return contract.AutomationStepResult{Cancelled: true}, nil
	}
	return res, nil
}

func (a *Activities) runStep(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	in := s.in
	step, ok := s.def.Step(in.Key)
	if !ok {
		return contract.AutomationStepResult{Error: fmt.Sprintf("the step %q does not exist", in.Key)}, nil
	}
	s.step = step
	var res contract.AutomationStepResult
	switch in.Phase {
	case contract.PhaseWait:
		rec := s.record("waiting", nil, nil)
		if step.Type == automation.WaitForEvent {
			var c automation.WaitForEventConfig
			_ = json.Unmarshal(step.Config, &c)
			rec.WaitingEvent = &c.EventName
		}
		return a.save(ctx, s, rec, res)
	case contract.PhaseCheck:
		return a.checkEvent(ctx, s)
	case contract.PhaseDone:
		done := contract.AutomationStepDone{Key: in.Key, Iteration: in.Iteration, Seq: in.Seq, Outcome: in.Outcome}
		return a.save(ctx, s, s.doneRecord(done), contract.AutomationStepResult{Outcome: in.Outcome})
	}
	switch step.Type {
	case automation.Trigger:
		done := contract.AutomationStepDone{Key: in.Key, Iteration: in.Iteration, Seq: in.Seq, Outcome: automation.Default}
		return a.save(ctx, s, s.doneRecord(done), contract.AutomationStepResult{Outcome: automation.Default})
	case automation.Condition:
		return a.condition(ctx, s)
	case automation.SendEmail:
		return a.sendEmail(ctx, s)
	case automation.ContactUpdate:
		return a.contactUpdate(ctx, s)
	case automation.ContactDelete:
		return a.contactDelete(ctx, s)
	case automation.AddToSegment:
		return a.addToSegment(ctx, s)
	}
	return a.fail(ctx, s, fmt.Sprintf("a %s step has no phase %q", step.Type, in.Phase))
}

// save records rec, after the step the run completed before it
// (s.pending), and returns res, or Cancelled when the run is no longer
// running. With EndRun, a final rec whose outcome no connection follows,
// or that failed, ends the run in the same transaction (Finished).
func (a *Activities) save(ctx context.Context, s *stepRun, rec store.StepRecord,
	res contract.AutomationStepResult) (contract.AutomationStepResult, error) {
	recs := []store.StepRecord{rec}
	if s.pending != nil {
		recs = []store.StepRecord{*s.pending, rec}
	}
	var end *store.RunEnd
	if s.in.EndRun && rec.Final() {
		if res.Error != "" {
			end = &store.RunEnd{Status: store.RunFailed, Error: res.Error}
		} else if _, ok := s.def.Follow(rec.Key, res.Outcome); !ok {
			end = &store.RunEnd{Status: store.RunCompleted}
		}
	}
	running, err := a.st.RecordSteps(ctx, recs, end)
	if err != nil {
		return contract.AutomationStepResult{}, err
	}
	s.pending = nil
	if !running {
		return contract.AutomationStepResult{Cancelled: true}, nil
	}
	res.Finished = end != nil
	return res, nil
}

// fail records the step failed with reason; the run then fails.
func (a *Activities) fail(ctx context.Context, s *stepRun, reason string) (contract.AutomationStepResult, error) {
	return a.save(ctx, s, s.record("failed", nil, errOutput(reason)),
		contract.AutomationStepResult{Error: fmt.Sprintf("step %q: %s", s.step.Key, reason)})
}

// data is what the run's rules and references read: the triggering
// event's payload, the contact as it is now, and the payloads of the
// events its wait_for_event steps received.
func (a *Activities) data(ctx context.Context, s *stepRun) (automation.Data, *store.Contact, error) {
	run := s.run
	d := automation.Data{Event: map[string]any{}, Contact: map[string]any{}, WaitEvents: map[string]map[string]any{}}
	ev, err := a.st.EventSendByID(ctx, run.EventID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return d, nil, err
	}
	if err == nil {
		_ = json.Unmarshal(ev.Payload, &d.Event)
	}
	var ct *store.Contact
	if run.ContactID != nil {
		c, err := a.contacts.Contact(ctx, run.TeamID, store.ContactRef{ID: run.ContactID})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return d, nil, err
		}
		if err == nil {
			ct = &c
			props := map[string]any{}
			for k, v := range c.Properties {
				props[k] = v
			}
			d.Contact = map[string]any{"id": c.ID.String(), "email": c.Email, "first_name": c.FirstName,
				"last_name": c.LastName, "unsubscribed": c.Unsubscribed, "properties": props}
		}
	}
	if !s.def.Has(automation.WaitForEvent) {
		return d, ct, nil // no step received an event
	}
	full, err := a.st.AutomationRun(ctx, run.TeamID, run.AutomationID, run.ID)
	if err != nil {
		return d, ct, err
	}
	for _, st := range full.Steps {
		if st.Type != automation.WaitForEvent || st.Status != "completed" {
			continue
		}
		var out struct {
			EventID *uuid.UUID `json:"event_id"`
		}
		if json.Unmarshal(st.Output, &out) != nil || out.EventID == nil {
			continue
		}
		ev, err := a.st.EventSendByID(ctx, *out.EventID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return d, ct, err
		}
		m := map[string]any{}
		_ = json.Unmarshal(ev.Payload, &m)
		d.WaitEvents[ev.Name] = m
	}
	return d, ct, nil
}

// checkEvent completes a waiting wait_for_event step with the first event
// of its name sent for the contact since it began waiting that meets its
// filter rule. A check retried after it completed the step (its answer
// was lost) answers as it did.
func (a *Activities) checkEvent(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	var c automation.WaitForEventConfig
	_ = json.Unmarshal(s.step.Config, &c)
	if s.run.WaitingSince == nil {
		// The run waits for nothing: this visit may be over already.
		return a.checked(ctx, s)
	}
	const page = 100
	var (
		d      automation.Data
		loaded bool
		after  *store.EventSend
	)
	for {
		events, err := a.st.EventsSince(ctx, s.run.ID, c.EventName, after, page)
		if err != nil {
			return contract.AutomationStepResult{}, err
		}
		if c.FilterRule != nil && len(events) > 0 && !loaded {
			if d, _, err = a.data(ctx, s); err != nil {
				return contract.AutomationStepResult{}, err
			}
			loaded = true
		}
		for _, ev := range events {
			if c.FilterRule != nil {
				payload := map[string]any{}
				_ = json.Unmarshal(ev.Payload, &payload)
				d.Event = payload
				if !c.FilterRule.Eval(d) {
					continue
				}
			}
			return a.save(ctx, s, s.record("completed", map[string]any{"event_id": ev.ID}, nil),
				contract.AutomationStepResult{Outcome: automation.EventReceived})
		}
		if len(events) < page {
			return contract.AutomationStepResult{}, nil
		}
		after = &events[len(events)-1]
	}
}

// checked answers a check of a visit of a wait_for_event step that is no
// longer waiting: the outcome it completed with, or nothing.
func (a *Activities) checked(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	full, err := a.st.AutomationRun(ctx, s.run.TeamID, s.run.AutomationID, s.run.ID)
	if err != nil {
		return contract.AutomationStepResult{}, err
	}
	for _, st := range full.Steps {
		if st.Key != s.in.Key || st.Iteration != s.in.Iteration || st.Status != "completed" {
			continue
		}
		var out struct {
			EventID  *uuid.UUID `json:"event_id"`
			TimedOut bool       `json:"timed_out"`
		}
		_ = json.Unmarshal(st.Output, &out)
		switch {
		case out.EventID != nil:
			return contract.AutomationStepResult{Outcome: automation.EventReceived}, nil
		case out.TimedOut:
			return contract.AutomationStepResult{Outcome: automation.Timeout}, nil
		}
	}
	return contract.AutomationStepResult{}, nil
}

func (a *Activities) condition(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	var r automation.Rule
	if err := json.Unmarshal(s.step.Config, &r); err != nil {
		return a.fail(ctx, s, "its rule cannot be read")
	}
	d, _, err := a.data(ctx, s)
	if err != nil {
		return contract.AutomationStepResult{}, err
	}
	met := r.Eval(d)
	outcome := automation.ConditionNotMet
	if met {
		outcome = automation.ConditionMet
	}
	return a.save(ctx, s, s.record("completed", map[string]any{"result": met}, nil),
		contract.AutomationStepResult{Outcome: outcome})
}

// contactStep reads the config of a step about the run's contact into c,
// and the run's data and contact. done: the step failed (its config cannot
// be read, its contact was deleted) and res says so.
func (a *Activities) contactStep(ctx context.Context, s *stepRun, c any) (d automation.Data, ct *store.Contact,
	res contract.AutomationStepResult, done bool, err error) {
	if err := json.Unmarshal(s.step.Config, c); err != nil {
		res, err = a.fail(ctx, s, "its config cannot be read")
		return d, nil, res, true, err
	}
	if d, ct, err = a.data(ctx, s); err != nil {
		return d, nil, res, true, err
	}
	if ct == nil {
		res, err = a.fail(ctx, s, "the contact was deleted")
		return d, nil, res, true, err
	}
	return d, ct, res, false, nil
}

// IdempotencyKey is the key a send_email step's email is accepted under:
// the run, the step and the visit, so a retried step never sends twice.
func IdempotencyKey(runID uuid.UUID, key string, visit int) string {
	return fmt.Sprintf("automation-run/%s/%s/%d", runID, key, visit)
}

// sendEmail sends the step's template to the contact through the send
// path the API uses (suppressions, topics, quota, DKIM, tracking,
// webhooks): an unsubscribed contact is skipped; a team whose sending is
// paused, or whose quota is used up, waits; anything else the send path
// refuses fails the step with its reason.
func (a *Activities) sendEmail(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	var c automation.SendEmailConfig
	d, ct, failed, done, err := a.contactStep(ctx, s, &c)
	if done || err != nil {
		return failed, err
	}
	if ct.Unsubscribed {
		return a.save(ctx, s, s.record("skipped", map[string]any{"reason": "the contact is unsubscribed"}, nil),
			contract.AutomationStepResult{Outcome: automation.Default})
	}
	pause, err := a.insights.SendingPause(ctx, s.run.TeamID)
	if err != nil {
		return contract.AutomationStepResult{}, err
	}
	if pause != nil {
		return a.paused(ctx, s, pause.Message())
	}
	vars := map[string]json.RawMessage{}
	for name, v := range c.Template.Variables {
		if got, ok := automation.Resolve(v, d); ok {
			vars[name] = got
		}
	}
	req := submit.SendRequest{To: submit.AddressList{ct.Email}, Subject: c.Subject, TopicID: c.TopicID,
		Template: &submit.TemplateRequest{ID: c.Template.ID, Variables: vars}}
	if c.From != nil {
		req.From = *c.From
	}
	if c.ReplyTo != nil && *c.ReplyTo != "" {
		req.ReplyTo = submit.AddressList{*c.ReplyTo}
	}
	key := IdempotencyKey(s.run.ID, s.step.Key, s.in.Iteration)
	res, err := a.submit.SendWithOptions(ctx, submit.Sender{TeamID: s.run.TeamID}, req,
		submit.SendOptions{IdempotencyKey: &key})
	var qe *store.QuotaExceededError
	var se *submit.Error
	var ie *invalid.Error
	switch {
	case err == nil:
		return a.save(ctx, s, s.record("completed", map[string]any{"email_id": res.ID}, nil),
			contract.AutomationStepResult{Outcome: automation.Default})
	case errors.As(err, &qe) || errors.Is(err, store.ErrQuotaExceeded):
		return a.paused(ctx, s, "the team's monthly quota is used up")
	case errors.As(err, &se) && se.Kind == submit.KindIdempotencyMismatch:
		// An earlier attempt of this visit sent the email, with the
		// contact's data as it was then.
		return a.save(ctx, s, s.record("completed", map[string]any{"email_id": nil,
			"note": "sent by an earlier attempt"}, nil), contract.AutomationStepResult{Outcome: automation.Default})
	case errors.As(err, &se) && se.Kind == submit.KindIdempotencyInFlight:
		return contract.AutomationStepResult{}, err // the other attempt finishes first
	case errors.As(err, &se) && se.Kind == submit.KindForbidden:
		// Sending may have been paused since the check above: then wait,
		// as for a pause seen before the send.
		if pause, perr := a.insights.SendingPause(ctx, s.run.TeamID); perr != nil {
			return contract.AutomationStepResult{}, perr
		} else if pause != nil {
			return a.paused(ctx, s, pause.Message())
		}
		return a.fail(ctx, s, se.Message)
	case errors.As(err, &se):
		return a.fail(ctx, s, se.Message)
	case errors.As(err, &ie):
		return a.fail(ctx, s, ie.Message)
	}
	return contract.AutomationStepResult{}, err
}

// paused records a step that cannot go on yet; the workflow tries again.
func (a *Activities) paused(ctx context.Context, s *stepRun, reason string) (contract.AutomationStepResult, error) {
	return a.save(ctx, s, s.record("waiting", nil, errOutput(reason)), contract.AutomationStepResult{Paused: reason})
}

func (a *Activities) contactUpdate(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	var c automation.ContactUpdateConfig
	d, ct, res, done, err := a.contactStep(ctx, s, &c)
	if done || err != nil {
		return res, err
	}
	var in audience.ContactInput
	str := func(raw json.RawMessage) (*string, bool) {
		v, ok := automation.Resolve(raw, d)
		if !ok {
			return nil, false
		}
		var x any
		_ = json.Unmarshal(v, &x)
		switch t := x.(type) {
		case nil:
			empty := ""
			return &empty, true
		case string:
			return &t, true
		}
		text := string(v)
		return &text, true
	}
	if len(c.FirstName) > 0 {
		in.FirstName, _ = str(c.FirstName)
	}
	if len(c.LastName) > 0 {
		in.LastName, _ = str(c.LastName)
	}
	if len(c.Unsubscribed) > 0 {
		if v, ok := automation.Resolve(c.Unsubscribed, d); ok {
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return a.fail(ctx, s, "unsubscribed is not a boolean")
			}
			in.Unsubscribed = &b
		}
	}
	if len(c.Properties) > 0 {
		in.Properties = map[string]any{}
		for k, raw := range c.Properties {
			v, ok := automation.Resolve(raw, d)
			if !ok {
				continue
			}
			var x any
			_ = json.Unmarshal(v, &x)
			in.Properties[k] = x
		}
	}
	_, err = a.audience.UpdateContact(ctx, s.run.TeamID, store.ContactRef{ID: &ct.ID}, in)
	var ie *invalid.Error
	switch {
	case errors.As(err, &ie):
		return a.fail(ctx, s, ie.Message)
	case errors.Is(err, store.ErrNotFound):
		return a.fail(ctx, s, "the contact was deleted")
	case err != nil:
		return contract.AutomationStepResult{}, err
	}
	return a.save(ctx, s, s.record("completed", map[string]any{"contact_id": ct.ID}, nil),
		contract.AutomationStepResult{Outcome: automation.Default})
}

// contactDelete deletes the run's contact (contact.deleted). The step is
// recorded running first, so the deletion, which cancels the contact's
// other runs, leaves this one; the run then ends completed.
func (a *Activities) contactDelete(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	if res, err := a.save(ctx, s, s.record("running", nil, nil), contract.AutomationStepResult{}); err != nil || res.Cancelled {
		return res, err
	}
	if s.run.ContactID != nil {
		_, err := a.audience.DeleteContact(ctx, s.run.TeamID, store.ContactRef{ID: s.run.ContactID})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return contract.AutomationStepResult{}, err
		}
	}
	return a.save(ctx, s, s.record("completed", map[string]any{"deleted": true}, nil), contract.AutomationStepResult{})
}

func (a *Activities) addToSegment(ctx context.Context, s *stepRun) (contract.AutomationStepResult, error) {
	var c automation.AddToSegmentConfig
	_ = json.Unmarshal(s.step.Config, &c)
	seg, err := uuid.Parse(c.SegmentID)
	if err != nil {
		return a.fail(ctx, s, fmt.Sprintf("%q is not a segment id", c.SegmentID))
	}
	if s.run.ContactID == nil {
		return a.fail(ctx, s, "the contact was deleted")
	}
	err = a.audience.AddToSegment(ctx, s.run.TeamID, *s.run.ContactID, seg)
	var re *store.RefError
	switch {
	case errors.As(err, &re) || errors.Is(err, store.ErrNotFound):
		return a.fail(ctx, s, fmt.Sprintf("the segment %s no longer exists", seg))
	case err != nil:
		return contract.AutomationStepResult{}, err
	}
	return a.save(ctx, s, s.record("completed", map[string]any{"segment_id": seg}, nil),
		contract.AutomationStepResult{Outcome: automation.Default})
}
