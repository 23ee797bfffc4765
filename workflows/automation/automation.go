// Package automation is the definition of an automation as Resend's API
// has it (steps joined by connections), its validation as a graph, and the
// pure pieces its runs interpret: the next step along a connection, rules
// over event and contact data, delays in words and variable references.
// It does no I/O, so the AutomationRun workflow and the automations
// service share it.
package automation

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Step types.
const (
	Trigger       = "trigger"
	Delay         = "delay"
	SendEmail     = "send_email"
	WaitForEvent  = "wait_for_event"
	Condition     = "condition"
	ContactUpdate = "contact_update"
	ContactDelete = "contact_delete"
	AddToSegment  = "add_to_segment"
)

// StepTypes lists the step types in the order the editor offers them.
var StepTypes = []string{Trigger, SendEmail, Delay, WaitForEvent, Condition, ContactUpdate, ContactDelete, AddToSegment}

// Connection types: which outcome of its source step a connection follows.
const (
	Default         = "default"
	ConditionMet    = "condition_met"
	ConditionNotMet = "condition_not_met"
	Timeout         = "timeout"
	EventReceived   = "event_received"
)

// Limits of a definition.
const (
	// MaxSteps is the most steps one automation may have.
	MaxSteps = 100
	// MaxWait is the longest delay or wait_for_event timeout (Resend's).
	MaxWait = 30 * 24 * time.Hour
	// MaxKey is the longest step key.
	MaxKey = 64
	// MaxRuleDepth bounds the nesting of and/or rules.
	MaxRuleDepth = 5
)

// Step is one step of a definition: a key unique in it, a type and the
// type's configuration, as the API has them.
type Step struct {
	Key    string          `json:"key"`
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config"`
}

// Connection joins two steps: the run goes From → To when From ends with
// the outcome Type ("" is Default).
type Connection struct {
	From string `json:"from"`
	To   string `json:"to"`
	Type string `json:"type"`
}

// Definition is an automation's graph: what a run interprets. A run keeps
// the definition it started with.
type Definition struct {
	Steps       []Step       `json:"steps"`
	Connections []Connection `json:"connections"`
}

// TriggerConfig is the config of a trigger step.
type TriggerConfig struct {
	EventName string `json:"event_name"`
}

// DelayConfig is the config of a delay step: a duration in words
// (ParseDuration).
type DelayConfig struct {
	Duration string `json:"duration"`
}

// TemplateRef is the template a send_email step sends and the values of
// its variables: each a JSON value, or a reference {"var": "event.x"}
// (Resolve).
type TemplateRef struct {
	ID        string                     `json:"id"`
	Variables map[string]json.RawMessage `json:"variables,omitempty"`
}

// SendEmailConfig is the config of a send_email step: a published template
// and overrides of its sender, subject and reply-to, and a topic.
type SendEmailConfig struct {
	Template TemplateRef `json:"template"`
	Subject  *string     `json:"subject,omitempty"`
	From     *string     `json:"from,omitempty"`
	ReplyTo  *string     `json:"reply_to,omitempty"`
	TopicID  *string     `json:"topic_id,omitempty"`
}

// WaitForEventConfig is the config of a wait_for_event step: the event
// awaited, for how long at most ("" waits MaxWait), and a rule its payload
// must meet.
type WaitForEventConfig struct {
	EventName  string `json:"event_name"`
	Timeout    string `json:"timeout,omitempty"`
	FilterRule *Rule  `json:"filter_rule,omitempty"`
}

// ContactUpdateConfig is the config of a contact_update step. Each field,
// when present, is a value or a reference (Resolve); null clears a name.
type ContactUpdateConfig struct {
	FirstName    json.RawMessage            `json:"first_name,omitempty"`
	LastName     json.RawMessage            `json:"last_name,omitempty"`
	Unsubscribed json.RawMessage            `json:"unsubscribed,omitempty"`
	Properties   map[string]json.RawMessage `json:"properties,omitempty"`
}

// AddToSegmentConfig is the config of an add_to_segment step.
type AddToSegmentConfig struct {
	SegmentID string `json:"segment_id"`
}

// StepError is a definition that cannot be saved, naming its step (or ""
// for the whole graph).
type StepError struct {
	Key string
	Msg string
}

func (e *StepError) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return fmt.Sprintf("step %q: %s", e.Key, e.Msg)
}

func stepErr(key, format string, args ...any) error {
	return &StepError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Step returns the step with the key.
func (d Definition) Step(key string) (Step, bool) {
	for _, s := range d.Steps {
		if s.Key == key {
			return s, true
		}
	}
	return Step{}, false
}

// Has reports whether a step of the type typ is in the definition.
func (d Definition) Has(typ string) bool {
	for _, s := range d.Steps {
		if s.Type == typ {
			return true
		}
	}
	return false
}

// TriggerStep returns the definition's trigger.
func (d Definition) TriggerStep() (Step, bool) {
	for _, s := range d.Steps {
		if s.Type == Trigger {
			return s, true
		}
	}
	return Step{}, false
}

// EventName is the event that starts runs of the definition ("" when it
// has no valid trigger).
func (d Definition) EventName() string {
	t, ok := d.TriggerStep()
	if !ok {
		return ""
	}
	var c TriggerConfig
	if json.Unmarshal(t.Config, &c) != nil {
		return ""
	}
	return c.EventName
}

// Next is the step that follows from when it ended with the outcome typ:
// false when no connection leaves it that way (the run then ends).
func (d Definition) Next(from, typ string) (string, bool) {
	for _, c := range d.Connections {
		if c.From == from && connType(c) == typ {
			return c.To, true
		}
	}
	return "", false
}

// Follow is where a run goes after the step from ended with outcome: the
// connection of that type or, for an event received, the step's default
// connection; false when neither leaves it (the run then ends). The
// workflow and the activity that records a run's end both follow it.
func (d Definition) Follow(from, outcome string) (string, bool) {
	next, ok := d.Next(from, outcome)
	if !ok && outcome == EventReceived {
		next, ok = d.Next(from, Default)
	}
	return next, ok
}

func connType(c Connection) string {
	if c.Type == "" {
		return Default
	}
	return c.Type
}

// outcomes are the connection types each step type may leave by.
var outcomes = map[string][]string{
	Trigger:       {Default},
	Delay:         {Default},
	SendEmail:     {Default},
	WaitForEvent:  {EventReceived, Timeout, Default},
	Condition:     {ConditionMet, ConditionNotMet},
	ContactUpdate: {Default},
	ContactDelete: nil, // it ends the run: its contact is gone
	AddToSegment:  {Default},
}

// waits are the step types a cycle must pass through: a loop then spends
// durable time each round instead of spinning.
var waits = map[string]bool{Delay: true, WaitForEvent: true}

var keyRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// Validate checks a definition as a graph: known step types with valid
// configs, unique keys, exactly one trigger and nothing leading into it,
// connections between known steps by outcomes their source has (at most
// one per outcome), every step reachable from the trigger, and no cycle
// that does not pass through a delay or a wait_for_event. The error is a
// *StepError naming the step at fault.
func (d Definition) Validate() error {
	if len(d.Steps) == 0 {
		return stepErr("", "an automation needs steps, the first a trigger")
	}
	if len(d.Steps) > MaxSteps {
		return stepErr("", "an automation has at most %d steps", MaxSteps)
	}
	byKey := map[string]Step{}
	triggers := 0
	for i, s := range d.Steps {
		if s.Key == "" {
			return stepErr("", "steps[%d] has no key", i)
		}
		if len(s.Key) > MaxKey || !keyRE.MatchString(s.Key) {
			return stepErr(s.Key, "a key is 1 to %d letters, digits, '_', '.', ':' or '-'", MaxKey)
		}
		if _, dup := byKey[s.Key]; dup {
			return stepErr(s.Key, "the key is used by two steps")
		}
		byKey[s.Key] = s
		if s.Type == Trigger {
			triggers++
		}
		if err := s.validateConfig(); err != nil {
			return err
		}
	}
	if triggers != 1 {
		return stepErr("", "an automation has exactly one trigger step (it has %d)", triggers)
	}
	out := map[string][]string{}
	seen := map[[2]string]bool{}
	for _, c := range d.Connections {
		from, ok := byKey[c.From]
		if !ok {
			return stepErr(c.From, "a connection leaves a step that does not exist")
		}
		to, ok := byKey[c.To]
		if !ok {
			return stepErr(c.From, "a connection leads to %q, which does not exist", c.To)
		}
		if to.Type == Trigger {
			return stepErr(c.From, "a connection leads into the trigger %q; nothing may", c.To)
		}
		if c.From == c.To {
			return stepErr(c.From, "a connection leads from the step to itself")
		}
		typ := connType(c)
		if from.Type == ContactDelete {
			return stepErr(c.From, "a contact_delete step ends the run (its contact is gone): no connection may leave it")
		}
		if !contains(outcomes[from.Type], typ) {
			return stepErr(c.From, "a %s step has no %q connection (it has %s)", from.Type, typ,
				strings.Join(outcomes[from.Type], ", "))
		}
		if seen[[2]string{c.From, typ}] {
			return stepErr(c.From, "two %q connections leave the step", typ)
		}
		if from.Type == WaitForEvent && (typ == Default && (seen[[2]string{c.From, EventReceived}] ||
			seen[[2]string{c.From, Timeout}]) || typ != Default && seen[[2]string{c.From, Default}]) {
			return stepErr(c.From, "a wait_for_event step leaves either by \"default\" (on the event) or by "+
				"\"event_received\" and \"timeout\", not both")
		}
		seen[[2]string{c.From, typ}] = true
		out[c.From] = append(out[c.From], c.To)
	}
	trigger, _ := d.TriggerStep()
	reached := map[string]bool{trigger.Key: true}
	queue := []string{trigger.Key}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		for _, n := range out[k] {
			if !reached[n] {
				reached[n] = true
				queue = append(queue, n)
			}
		}
	}
	for _, s := range d.Steps {
		if !reached[s.Key] {
			return stepErr(s.Key, "no connection from the trigger reaches the step")
		}
	}
	if k := cycleWithoutWait(d.Steps, out, byKey); k != "" {
		return stepErr(k, "the step is on a loop without a delay or wait_for_event; a loop must wait")
	}
	return nil
}

// cycleWithoutWait returns a step on a cycle of the graph without its wait
// steps, or "".
func cycleWithoutWait(steps []Step, out map[string][]string, byKey map[string]Step) string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var found string
	var visit func(k string) bool
	visit = func(k string) bool {
		color[k] = grey
		for _, n := range out[k] {
			if waits[byKey[n].Type] {
				continue
			}
			switch color[n] {
			case grey:
				found = n
				return true
			case white:
				if visit(n) {
					return true
				}
			}
		}
		color[k] = black
		return false
	}
	for _, s := range steps {
		if waits[s.Type] || color[s.Key] != white {
			continue
		}
		if visit(s.Key) {
			return found
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// decodeStrict decodes a step's config, refusing unknown fields.
func decodeStrict(s Step, v any) error {
	raw := s.Config
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return stepErr(s.Key, "invalid %s config: %s", s.Type, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func (s Step) validateConfig() error {
	switch s.Type {
	case Trigger:
		var c TriggerConfig
		if err := decodeStrict(s, &c); err != nil {
			return err
		}
		return validateEventName(s.Key, c.EventName)
	case Delay:
		var c DelayConfig
		if err := decodeStrict(s, &c); err != nil {
			return err
		}
		if _, err := ParseDuration(c.Duration); err != nil {
			return stepErr(s.Key, "duration: %v", err)
		}
	case SendEmail:
		var c SendEmailConfig
		if err := decodeStrict(s, &c); err != nil {
			return err
		}
		if strings.TrimSpace(c.Template.ID) == "" {
			return stepErr(s.Key, "template.id is required: a published template")
		}
		for name, v := range c.Template.Variables {
			if err := validateValue(v); err != nil {
				return stepErr(s.Key, "template variable %q: %v", name, err)
			}
		}
	case WaitForEvent:
		var c WaitForEventConfig
		if err := decodeStrict(s, &c); err != nil {
			return err
		}
		if err := validateEventName(s.Key, c.EventName); err != nil {
			return err
		}
		if c.Timeout != "" {
			if _, err := ParseDuration(c.Timeout); err != nil {
				return stepErr(s.Key, "timeout: %v", err)
			}
		}
		if c.FilterRule != nil {
			if err := c.FilterRule.validate(0); err != nil {
				return stepErr(s.Key, "filter_rule: %v", err)
			}
		}
	case Condition:
		var r Rule
		if err := decodeStrict(s, &r); err != nil {
			return err
		}
		if err := r.validate(0); err != nil {
			return stepErr(s.Key, "%v", err)
		}
	case ContactUpdate:
		var c ContactUpdateConfig
		if err := decodeStrict(s, &c); err != nil {
			return err
		}
		fields := map[string]json.RawMessage{"first_name": c.FirstName, "last_name": c.LastName,
			"unsubscribed": c.Unsubscribed}
		for k, v := range c.Properties {
			fields["properties."+k] = v
		}
		n := 0
		for name, v := range fields {
			if len(v) == 0 {
				continue
			}
			n++
			if err := validateValue(v); err != nil {
				return stepErr(s.Key, "%s: %v", name, err)
			}
		}
		if n == 0 {
			return stepErr(s.Key, "a contact_update step changes at least one field")
		}
	case ContactDelete:
		var c struct{}
		return decodeStrict(s, &c)
	case AddToSegment:
		var c AddToSegmentConfig
		if err := decodeStrict(s, &c); err != nil {
			return err
		}
		if strings.TrimSpace(c.SegmentID) == "" {
			return stepErr(s.Key, "segment_id is required")
		}
	default:
		return stepErr(s.Key, "unknown step type %q (one of %s)", s.Type, strings.Join(StepTypes, ", "))
	}
	return nil
}

// MaxEventName is the longest event name.
const MaxEventName = 128

// ValidateEventName checks an event name: 1 to MaxEventName printable
// characters, not starting with "resend:" (reserved for system events).
func ValidateEventName(name string) error {
	if err := validateEventName("", name); err != nil {
		return fmt.Errorf("%s", err.(*StepError).Msg)
	}
	return nil
}

func validateEventName(key, name string) error {
	if strings.TrimSpace(name) == "" {
		return stepErr(key, "event_name is required")
	}
	if len(name) > MaxEventName {
		return stepErr(key, "event_name is at most %d characters", MaxEventName)
	}
	for _, r := range name {
		if r < 0x21 || r == 0x7f {
			return stepErr(key, "event_name has no spaces or control characters")
		}
	}
	if strings.HasPrefix(strings.ToLower(name), "resend:") {
		return stepErr(key, "event names starting with \"resend:\" are reserved")
	}
	return nil
}

// Durations in words: "30 minutes", "1 hour", "3 days", "1 week", and the
// short forms "30m", "12h", "3d".
var durationRE = regexp.MustCompile(`^(\d{1,7})\s*([a-z]+)$`)

var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseDuration reads a duration in words, from one second up to MaxWait.
func ParseDuration(s string) (time.Duration, error) {
	m := durationRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, fmt.Errorf("%q is not a duration such as \"30 minutes\", \"2 hours\", \"3 days\" or \"1 week\"", s)
	}
	n, _ := strconv.Atoi(m[1])
	unit, ok := units[m[2]]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (seconds, minutes, hours, days or weeks)", s, m[2])
	}
	d := time.Duration(n) * unit
	if n == 0 {
		return 0, fmt.Errorf("%q is not longer than zero", s)
	}
	if d > MaxWait || d/unit != time.Duration(n) {
		return 0, fmt.Errorf("%q is longer than the maximum of 30 days", s)
	}
	return d, nil
}
