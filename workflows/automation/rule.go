package automation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Rule types and operators, as Resend's SDK types them.
const (
	RuleLeaf = "rule"
	RuleAnd  = "and"
	RuleOr   = "or"
)

// operatorValue says what value each operator takes: "any" (string,
// number, boolean or null), "number", "string" or "none".
var operatorValue = map[string]string{
	"eq": "any", "neq": "any",
	"gt": "number", "gte": "number", "lt": "number", "lte": "number",
	"contains": "string", "starts_with": "string", "ends_with": "string",
	"exists": "none", "is_empty": "none",
}

// Rule is a condition over the run's data: a leaf compares one field
// ("event.x", "contact.first_name", "wait_events.name.x") with a value;
// "and" and "or" combine rules.
type Rule struct {
	Type     string          `json:"type"`
	Field    string          `json:"field,omitempty"`
	Operator string          `json:"operator,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	Rules    []Rule          `json:"rules,omitempty"`
}

func (r Rule) validate(depth int) error {
	switch r.Type {
	case RuleAnd, RuleOr:
		if depth >= MaxRuleDepth {
			return fmt.Errorf("rules nest at most %d deep", MaxRuleDepth)
		}
		if len(r.Rules) == 0 {
			return fmt.Errorf("an %q rule needs rules", r.Type)
		}
		for _, x := range r.Rules {
			if err := x.validate(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case RuleLeaf:
	default:
		return fmt.Errorf("unknown rule type %q (rule, and or or)", r.Type)
	}
	if err := validateField(r.Field); err != nil {
		return err
	}
	want, ok := operatorValue[r.Operator]
	if !ok {
		return fmt.Errorf("unknown operator %q", r.Operator)
	}
	v, err := decodeValue(r.Value)
	if err != nil {
		return fmt.Errorf("value: %v", err)
	}
	switch want {
	case "none":
		if len(r.Value) != 0 {
			return fmt.Errorf("operator %q takes no value", r.Operator)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return fmt.Errorf("operator %q takes a number", r.Operator)
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("operator %q takes a string", r.Operator)
		}
	case "any":
		if len(r.Value) == 0 {
			return fmt.Errorf("operator %q takes a value", r.Operator)
		}
		switch v.(type) {
		case nil, string, float64, bool:
		default:
			return fmt.Errorf("operator %q takes a string, number, boolean or null", r.Operator)
		}
	}
	return nil
}

// validateField checks a field reference: "event.<path>", "payload.<path>"
// (the same), "contact.<field>" or "wait_events.<event>.<path>".
func validateField(f string) error {
	ns, rest, ok := strings.Cut(f, ".")
	if !ok || rest == "" {
		return fmt.Errorf("field %q must start with event., contact. or wait_events.", f)
	}
	switch ns {
	case "event", "payload", "contact":
		return nil
	case "wait_events":
		if name, path, ok := strings.Cut(rest, "."); ok && name != "" && path != "" {
			return nil
		}
		return fmt.Errorf("field %q must be wait_events.<event name>.<field>", f)
	}
	return fmt.Errorf("field %q must start with event., contact. or wait_events.", f)
}

func decodeValue(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// Data is what rules and references read: the triggering event's payload,
// the contact (email, first_name, last_name, unsubscribed and its
// properties by key) and the payloads of the events waited for, by name.
type Data struct {
	Event      map[string]any            `json:"event,omitempty"`
	Contact    map[string]any            `json:"contact,omitempty"`
	WaitEvents map[string]map[string]any `json:"wait_events,omitempty"`
}

// Lookup returns the value of a field reference (validateField), false
// when it is absent.
func (d Data) Lookup(field string) (any, bool) {
	ns, rest, _ := strings.Cut(field, ".")
	var root map[string]any
	switch ns {
	case "event", "payload":
		root = d.Event
	case "contact":
		root = d.Contact
		if v, ok := root[rest]; ok {
			return v, true
		}
		if props, ok := root["properties"].(map[string]any); ok {
			if v, ok := path(props, rest); ok {
				return v, true
			}
		}
	case "wait_events":
		// Event names hold dots ("payment.completed"): the event is the
		// longest name waited for that the rest starts with.
		for i := len(rest) - 1; i > 0; i-- {
			if rest[i] != '.' {
				continue
			}
			if ev, ok := d.WaitEvents[rest[:i]]; ok {
				return path(ev, rest[i+1:])
			}
		}
		return nil, false
	}
	return path(root, rest)
}

// path walks a dotted path through nested objects.
func path(m map[string]any, p string) (any, bool) {
	var cur any = m
	for _, part := range strings.Split(p, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Eval tells whether the data meets the rule. A comparison with a field
// that is absent is false (but neq of an absent field is true, and
// is_empty holds for it).
func (r Rule) Eval(d Data) bool {
	switch r.Type {
	case RuleAnd:
		for _, x := range r.Rules {
			if !x.Eval(d) {
				return false
			}
		}
		return true
	case RuleOr:
		for _, x := range r.Rules {
			if x.Eval(d) {
				return true
			}
		}
		return false
	}
	got, present := d.Lookup(r.Field)
	want, _ := decodeValue(r.Value)
	switch r.Operator {
	case "exists":
		return present && got != nil
	case "is_empty":
		return !present || got == nil || got == "" || isEmptyCollection(got)
	case "eq":
		return present && equal(got, want)
	case "neq":
		return !present || !equal(got, want)
	case "gt", "gte", "lt", "lte":
		g, ok1 := number(got)
		w, ok2 := number(want)
		if !present || !ok1 || !ok2 {
			return false
		}
		switch r.Operator {
		case "gt":
			return g > w
		case "gte":
			return g >= w
		case "lt":
			return g < w
		}
		return g <= w
	case "contains", "starts_with", "ends_with":
		w, _ := want.(string)
		if !present {
			return false
		}
		if list, ok := got.([]any); ok && r.Operator == "contains" {
			for _, x := range list {
				if equal(x, w) {
					return true
				}
			}
			return false
		}
		g, ok := got.(string)
		if !ok {
			return false
		}
		switch r.Operator {
		case "contains":
			return strings.Contains(g, w)
		case "starts_with":
			return strings.HasPrefix(g, w)
		}
		return strings.HasSuffix(g, w)
	}
	return false
}

func isEmptyCollection(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// number reads a number, or a string that holds one.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, true
		}
	}
	return 0, false
}

// equal compares JSON values; a number equals a string that holds it.
func equal(a, b any) bool {
	if fa, ok := a.(float64); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	if fb, ok := b.(float64); ok {
		fa, ok := number(a)
		return ok && fa == fb
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// validateValue checks a value of a template variable or contact field:
// any JSON value, or a reference {"var": "<field>"} to a valid field.
func validateValue(raw json.RawMessage) error {
	if ref, ok, err := reference(raw); ok || err != nil {
		if err != nil {
			return err
		}
		return validateField(ref)
	}
	var v any
	return json.Unmarshal(raw, &v)
}

// reference reads {"var": "<field>"}: ok when raw is such an object.
func reference(raw json.RawMessage) (string, bool, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return "", false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return "", false, err
	}
	v, ok := m["var"]
	if !ok || len(m) != 1 {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", true, fmt.Errorf("\"var\" is a string such as \"event.plan\"")
	}
	return s, true, nil
}

// Resolve returns a value with its reference, if it is one, replaced by
// the field's value in d: false when the field is absent (a template
// variable then takes its fallback).
func Resolve(raw json.RawMessage, d Data) (json.RawMessage, bool) {
	ref, ok, err := reference(raw)
	if err != nil {
		return nil, false
	}
	if !ok {
		return raw, true
	}
	v, present := d.Lookup(ref)
	if !present {
		return nil, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return out, true
}
