package automation

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// st is a step with its config as JSON text.
func st(key, typ, config string) Step {
	s := Step{Key: key, Type: typ}
	if config != "" {
		s.Config = json.RawMessage(config)
	}
	return s
}

// cn is a connection; typ "" is Default.
func cn(from, to, typ string) Connection { return Connection{From: from, To: to, Type: typ} }

// Valid steps of each type.
var (
	trig    = st("trig", Trigger, `{"event_name":"user.created"}`)
	send    = st("send", SendEmail, `{"template":{"id":"tpl_welcome","variables":{"name":{"var":"event.name"},"n":3}}}`)
	send2   = st("send2", SendEmail, `{"template":{"id":"tpl_2"},"subject":"Hi","from":"a@b.c","reply_to":"r@b.c","topic_id":"t1"}`)
	delay   = st("delay", Delay, `{"duration":"2 days"}`)
	wait    = st("wait", WaitForEvent, `{"event_name":"payment.completed","timeout":"3 days","filter_rule":{"type":"rule","field":"event.amount","operator":"gt","value":10}}`)
	wait2   = st("wait2", WaitForEvent, `{"event_name":"user.verified"}`)
	cond    = st("cond", Condition, `{"type":"and","rules":[{"type":"rule","field":"contact.plan","operator":"eq","value":"pro"},{"type":"or","rules":[{"type":"rule","field":"event.n","operator":"gte","value":1},{"type":"rule","field":"wait_events.payment.completed.amount","operator":"exists"}]}]}`)
	update  = st("update", ContactUpdate, `{"first_name":{"var":"event.first_name"},"last_name":null,"unsubscribed":false,"properties":{"plan":"pro","seats":{"var":"payload.seats"}}}`)
	remove  = st("remove", ContactDelete, `{}`)
	segment = st("segment", AddToSegment, `{"segment_id":"seg_1"}`)
)

// linear is trig → s.
func linear(s Step) Definition {
	return Definition{Steps: []Step{trig, s}, Connections: []Connection{cn("trig", s.Key, "")}}
}

// full is a valid graph with every step type and every connection type.
func full() Definition {
	return Definition{
		Steps: []Step{trig, cond, send, send2, delay, wait, wait2, update, remove, segment},
		Connections: []Connection{
			cn("trig", "cond", Default),
			cn("cond", "send", ConditionMet),
			cn("cond", "update", ConditionNotMet),
			cn("send", "delay", ""),
			cn("delay", "wait", ""),
			cn("wait", "segment", EventReceived),
			cn("wait", "wait2", Timeout),
			cn("wait2", "send2", Default),
			cn("update", "segment", ""),
			cn("segment", "remove", ""),
		},
	}
}

func TestValidateAccepts(t *testing.T) {
	for name, d := range map[string]Definition{
		"full graph":                      full(),
		"trigger alone":                   {Steps: []Step{trig}},
		"null config of contact_delete":   linear(st("remove", ContactDelete, `null`)),
		"absent config of contact_delete": linear(st("remove", ContactDelete, "")),
		"loop through a delay": {
			Steps: []Step{trig, send, delay},
			Connections: []Connection{
				cn("trig", "send", ""), cn("send", "delay", ""), cn("delay", "send", ""),
			},
		},
		"loop through a wait_for_event": {
			Steps: []Step{trig, send, cond, wait},
			Connections: []Connection{
				cn("trig", "send", ""), cn("send", "cond", ""), cn("cond", "wait", ConditionNotMet),
				cn("wait", "send", Timeout),
			},
		},
		"both branches of a condition to one step": {
			Steps:       []Step{trig, cond, send},
			Connections: []Connection{cn("trig", "cond", ""), cn("cond", "send", ConditionMet), cn("cond", "send", ConditionNotMet)},
		},
		"wait_for_event by default": {
			Steps:       []Step{trig, wait2, send},
			Connections: []Connection{cn("trig", "wait2", ""), cn("wait2", "send", "")},
		},
		"wait_for_event by event_received only": {
			Steps:       []Step{trig, wait, send},
			Connections: []Connection{cn("trig", "wait", ""), cn("wait", "send", EventReceived)},
		},
		"diamond (a join is no cycle)": {
			Steps: []Step{trig, cond, send, send2, segment},
			Connections: []Connection{
				cn("trig", "cond", ""), cn("cond", "send", ConditionMet), cn("cond", "send2", ConditionNotMet),
				cn("send", "segment", ""), cn("send2", "segment", ""),
			},
		},
		"longest key":              linear(st(strings.Repeat("k", MaxKey), SendEmail, `{"template":{"id":"t"}}`)),
		"key characters":           linear(st("a-Z_0.9:x", SendEmail, `{"template":{"id":"t"}}`)),
		"most steps":               chain(MaxSteps),
		"rule nested to the limit": linear(st("c", Condition, nested(MaxRuleDepth))),
		"eq null":                  linear(st("c", Condition, `{"type":"rule","field":"contact.x","operator":"eq","value":null}`)),
		"eq bool":                  linear(st("c", Condition, `{"type":"rule","field":"contact.unsubscribed","operator":"neq","value":true}`)),
		"is_empty":                 linear(st("c", Condition, `{"type":"rule","field":"event.tags","operator":"is_empty"}`)),
		"a variable that is an object, not a reference": linear(st("s", SendEmail,
			`{"template":{"id":"t","variables":{"o":{"var":"event.x","other":1},"p":{"a":1}}}}`)),
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, d.Validate())
		})
	}
}

// chain is trig → s1 → … with n steps in all.
func chain(n int) Definition {
	d := Definition{Steps: []Step{trig}}
	prev := "trig"
	for i := 1; i < n; i++ {
		k := fmt.Sprintf("s%d", i)
		d.Steps = append(d.Steps, st(k, AddToSegment, `{"segment_id":"seg"}`))
		d.Connections = append(d.Connections, cn(prev, k, ""))
		prev = k
	}
	return d
}

// nested is a condition config of "and" rules nested depth deep.
func nested(depth int) string {
	r := `{"type":"rule","field":"event.x","operator":"exists"}`
	for i := 0; i < depth; i++ {
		r = `{"type":"and","rules":[` + r + `]}`
	}
	return r
}

func TestValidateRefuses(t *testing.T) {
	type tc struct {
		d Definition
		// key is the step the error must name ("" for the graph).
		key string
		// msg is a part of the message.
		msg string
	}
	bad := func(s Step, msg string) tc { return tc{d: linear(s), key: s.Key, msg: msg} }
	cases := map[string]tc{
		"no steps":                  {d: Definition{}, msg: "needs steps"},
		"no steps, but connections": {d: Definition{Connections: []Connection{cn("a", "b", "")}}, msg: "needs steps"},
		"too many steps":            {d: chain(MaxSteps + 1), msg: "at most 100 steps"},
		"empty key":                 {d: Definition{Steps: []Step{trig, st("", SendEmail, `{"template":{"id":"t"}}`)}}, msg: "steps[1] has no key"},
		"key with a space":          bad(st("a b", ContactDelete, `{}`), "a key is"),
		"key with a slash":          bad(st("a/b", ContactDelete, `{}`), "a key is"),
		"key too long":              bad(st(strings.Repeat("k", MaxKey+1), ContactDelete, `{}`), "a key is"),
		"duplicate key": {d: Definition{Steps: []Step{trig, remove, st("remove", AddToSegment, `{"segment_id":"s"}`)},
			Connections: []Connection{cn("trig", "remove", "")}}, key: "remove", msg: "used by two steps"},
		"unknown type": bad(st("x", "send_sms", `{}`), `unknown step type "send_sms"`),
		"empty type":   bad(st("x", "", `{}`), "unknown step type"),

		// trigger
		"trigger without event_name": {d: Definition{Steps: []Step{st("t", Trigger, `{}`)}}, key: "t", msg: "event_name is required"},
		"trigger blank event_name":   {d: Definition{Steps: []Step{st("t", Trigger, `{"event_name":"  "}`)}}, key: "t", msg: "event_name is required"},
		"trigger on a resend: event": {d: Definition{Steps: []Step{st("t", Trigger, `{"event_name":"resend:email.sent"}`)}}, key: "t", msg: "reserved"},
		"trigger on a RESEND: event": {d: Definition{Steps: []Step{st("t", Trigger, `{"event_name":"RESEND:x"}`)}}, key: "t", msg: "reserved"},
		"trigger event_name with a space": {d: Definition{Steps: []Step{st("t", Trigger, `{"event_name":"user created"}`)}},
			key: "t", msg: "no spaces"},
		"trigger event_name too long": {d: Definition{Steps: []Step{st("t", Trigger,
			`{"event_name":"`+strings.Repeat("e", MaxEventName+1)+`"}`)}}, key: "t", msg: "at most 128"},
		"trigger unknown field": {d: Definition{Steps: []Step{st("t", Trigger, `{"event_name":"a","event":"b"}`)}},
			key: "t", msg: `unknown field "event"`},
		"trigger config not an object": {d: Definition{Steps: []Step{st("t", Trigger, `"user.created"`)}}, key: "t", msg: "invalid trigger config"},
		"trigger event_name not a string": {d: Definition{Steps: []Step{st("t", Trigger, `{"event_name":5}`)}},
			key: "t", msg: "invalid trigger config"},

		// delay
		"delay without duration": bad(st("d", Delay, `{}`), "duration"),
		"delay in words unknown": bad(st("d", Delay, `{"duration":"soon"}`), "not a duration"),
		"delay over 30 days":     bad(st("d", Delay, `{"duration":"31 days"}`), "maximum of 30 days"),
		"delay of zero":          bad(st("d", Delay, `{"duration":"0 minutes"}`), "not longer than zero"),
		"delay as a number":      bad(st("d", Delay, `{"duration":3600}`), "invalid delay config"),
		"delay unknown field":    bad(st("d", Delay, `{"duration":"1 day","seconds":5}`), `unknown field "seconds"`),
		"delay config absent":    bad(st("d", Delay, ""), "duration"),

		// send_email
		"send_email without template": bad(st("s", SendEmail, `{}`), "template.id is required"),
		"send_email blank template":   bad(st("s", SendEmail, `{"template":{"id":" "}}`), "template.id is required"),
		"send_email template_id (Resend's older shape)": bad(st("s", SendEmail, `{"template_id":"t"}`),
			`unknown field "template_id"`),
		"send_email unknown field in template": bad(st("s", SendEmail, `{"template":{"id":"t","vars":{}}}`),
			`unknown field "vars"`),
		"send_email reference not a string": bad(st("s", SendEmail, `{"template":{"id":"t","variables":{"a":{"var":5}}}}`),
			`template variable "a"`),
		"send_email reference to a bad field": bad(st("s", SendEmail, `{"template":{"id":"t","variables":{"a":{"var":"plan"}}}}`),
			`field "plan" must start with`),
		"send_email reference to an unknown namespace": bad(st("s", SendEmail,
			`{"template":{"id":"t","variables":{"a":{"var":"email.subject"}}}}`), `must start with`),
		"send_email subject not a string": bad(st("s", SendEmail, `{"template":{"id":"t"},"subject":1}`), "invalid send_email config"),

		// wait_for_event
		"wait_for_event without event_name": bad(st("w", WaitForEvent, `{"timeout":"1 day"}`), "event_name is required"),
		"wait_for_event on a resend: event": bad(st("w", WaitForEvent, `{"event_name":"resend:email.opened"}`), "reserved"),
		"wait_for_event bad timeout":        bad(st("w", WaitForEvent, `{"event_name":"e","timeout":"1 month"}`), "timeout"),
		"wait_for_event timeout over 30 days": bad(st("w", WaitForEvent, `{"event_name":"e","timeout":"5 weeks"}`),
			"maximum of 30 days"),
		"wait_for_event timeout_seconds (Resend's older shape)": bad(st("w", WaitForEvent,
			`{"event_name":"e","timeout_seconds":60}`), `unknown field "timeout_seconds"`),
		"wait_for_event bad filter_rule": bad(st("w", WaitForEvent,
			`{"event_name":"e","filter_rule":{"type":"rule","field":"event.x","operator":"like","value":"a"}}`),
			`filter_rule: unknown operator "like"`),
		"wait_for_event unknown field in filter_rule": bad(st("w", WaitForEvent,
			`{"event_name":"e","filter_rule":{"type":"rule","field":"event.x","operator":"exists","op":"x"}}`),
			`unknown field "op"`),

		// condition
		"condition empty":             bad(st("c", Condition, `{}`), "unknown rule type"),
		"condition unknown rule type": bad(st("c", Condition, `{"type":"not","rules":[]}`), `unknown rule type "not"`),
		"condition field without namespace": bad(st("c", Condition, `{"type":"rule","field":"plan","operator":"exists"}`),
			`field "plan" must start with`),
		"condition field with an empty path": bad(st("c", Condition, `{"type":"rule","field":"event.","operator":"exists"}`),
			"must start with"),
		"condition field in an unknown namespace": bad(st("c", Condition, `{"type":"rule","field":"email.to","operator":"exists"}`),
			"must start with"),
		"condition wait_events without a field": bad(st("c", Condition,
			`{"type":"rule","field":"wait_events.paid","operator":"exists"}`), "wait_events.<event name>.<field>"),
		"condition unknown operator": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"in","value":"a"}`),
			`unknown operator "in"`),
		"condition no operator":  bad(st("c", Condition, `{"type":"rule","field":"event.x"}`), `unknown operator ""`),
		"condition gt a string":  bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"gt","value":"5"}`), "takes a number"),
		"condition lte no value": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"lte"}`), "takes a number"),
		"condition contains a number": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"contains","value":5}`),
			"takes a string"),
		"condition starts_with null": bad(st("c", Condition,
			`{"type":"rule","field":"event.x","operator":"starts_with","value":null}`), "takes a string"),
		"condition exists with a value": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"exists","value":1}`),
			"takes no value"),
		"condition is_empty with null": bad(st("c", Condition,
			`{"type":"rule","field":"event.x","operator":"is_empty","value":null}`), "takes no value"),
		"condition eq without value": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"eq"}`), "takes a value"),
		"condition eq an object": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"eq","value":{"a":1}}`),
			"takes a string, number, boolean or null"),
		"condition neq an array": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"neq","value":[1]}`),
			"takes a string, number, boolean or null"),
		"condition and without rules": bad(st("c", Condition, `{"type":"and"}`), `an "and" rule needs rules`),
		"condition or with a bad rule": bad(st("c", Condition,
			`{"type":"or","rules":[{"type":"rule","field":"event.x","operator":"exists"},{"type":"rule"}]}`), "must start with"),
		"condition nested too deep": bad(st("c", Condition, nested(MaxRuleDepth+1)), "nest at most 5"),
		"condition unknown field": bad(st("c", Condition, `{"type":"rule","field":"event.x","operator":"exists","negate":true}`),
			`unknown field "negate"`),
		"condition unknown field in a nested rule": bad(st("c", Condition,
			`{"type":"and","rules":[{"type":"rule","field":"event.x","operator":"exists","x":1}]}`), `unknown field "x"`),
		"condition config absent": bad(st("c", Condition, ""), "unknown rule type"),

		// contact_update
		"contact_update changing nothing":       bad(st("u", ContactUpdate, `{}`), "at least one field"),
		"contact_update empty properties":       bad(st("u", ContactUpdate, `{"properties":{}}`), "at least one field"),
		"contact_update bad reference":          bad(st("u", ContactUpdate, `{"first_name":{"var":"name"}}`), "first_name"),
		"contact_update bad property reference": bad(st("u", ContactUpdate, `{"properties":{"plan":{"var":1}}}`), "properties.plan"),
		"contact_update unknown field":          bad(st("u", ContactUpdate, `{"email":"a@b.c"}`), `unknown field "email"`),

		// contact_delete
		"contact_delete unknown field": bad(st("x", ContactDelete, `{"hard":true}`), `unknown field "hard"`),
		"contact_delete array config":  bad(st("x", ContactDelete, `[]`), "invalid contact_delete config"),

		// add_to_segment
		"add_to_segment without segment": bad(st("g", AddToSegment, `{}`), "segment_id is required"),
		"add_to_segment unknown field":   bad(st("g", AddToSegment, `{"segment_id":"s","audience_id":"a"}`), `unknown field "audience_id"`),

		// triggers
		"no trigger": {d: Definition{Steps: []Step{send}}, msg: "exactly one trigger step (it has 0)"},
		"two triggers": {d: Definition{Steps: []Step{trig, st("trig2", Trigger, `{"event_name":"b"}`)}},
			msg: "exactly one trigger step (it has 2)"},

		// connections
		"connection from an unknown step": {d: Definition{Steps: []Step{trig, send},
			Connections: []Connection{cn("trig", "send", ""), cn("ghost", "send", "")}}, key: "ghost", msg: "does not exist"},
		"connection to an unknown step": {d: Definition{Steps: []Step{trig, send},
			Connections: []Connection{cn("trig", "send", ""), cn("send", "ghost", "")}}, key: "send", msg: `leads to "ghost"`},
		"connection into the trigger": {d: Definition{Steps: []Step{trig, delay},
			Connections: []Connection{cn("trig", "delay", ""), cn("delay", "trig", "")}}, key: "delay", msg: "into the trigger"},
		"trigger into itself": {d: Definition{Steps: []Step{trig},
			Connections: []Connection{cn("trig", "trig", "")}}, key: "trig", msg: "into the trigger"},
		"self loop": {d: Definition{Steps: []Step{trig, delay},
			Connections: []Connection{cn("trig", "delay", ""), cn("delay", "delay", "")}}, key: "delay", msg: "to itself"},
		"condition_met from a send_email": {d: Definition{Steps: []Step{trig, send, send2},
			Connections: []Connection{cn("trig", "send", ""), cn("send", "send2", ConditionMet)}},
			key: "send", msg: `a send_email step has no "condition_met" connection`},
		"default from a condition": {d: Definition{Steps: []Step{trig, cond, send},
			Connections: []Connection{cn("trig", "cond", ""), cn("cond", "send", "")}},
			key: "cond", msg: `a condition step has no "default" connection (it has condition_met, condition_not_met)`},
		"timeout from a trigger": {d: Definition{Steps: []Step{trig, send},
			Connections: []Connection{cn("trig", "send", Timeout)}}, key: "trig", msg: `no "timeout" connection`},
		"event_received from a delay": {d: Definition{Steps: []Step{trig, delay, send},
			Connections: []Connection{cn("trig", "delay", ""), cn("delay", "send", EventReceived)}},
			key: "delay", msg: `no "event_received" connection`},
		"a connection out of a contact_delete": {d: Definition{Steps: []Step{trig, remove, send},
			Connections: []Connection{cn("trig", "remove", ""), cn("remove", "send", "")}},
			key: "remove", msg: "no connection may leave it"},
		"unknown connection type": {d: Definition{Steps: []Step{trig, send},
			Connections: []Connection{cn("trig", "send", "always")}}, key: "trig", msg: `no "always" connection`},
		"two defaults from one step": {d: Definition{Steps: []Step{trig, send, send2},
			Connections: []Connection{cn("trig", "send", ""), cn("trig", "send2", Default)}},
			key: "trig", msg: `two "default" connections`},
		"two condition_met": {d: Definition{Steps: []Step{trig, cond, send, send2},
			Connections: []Connection{cn("trig", "cond", ""), cn("cond", "send", ConditionMet), cn("cond", "send2", ConditionMet)}},
			key: "cond", msg: `two "condition_met" connections`},
		"two timeouts": {d: Definition{Steps: []Step{trig, wait, send, send2},
			Connections: []Connection{cn("trig", "wait", ""), cn("wait", "send", Timeout), cn("wait", "send2", Timeout)}},
			key: "wait", msg: `two "timeout" connections`},
		"wait_for_event default after event_received": {d: Definition{Steps: []Step{trig, wait, send, send2},
			Connections: []Connection{cn("trig", "wait", ""), cn("wait", "send", EventReceived), cn("wait", "send2", "")}},
			key: "wait", msg: "not both"},
		"wait_for_event default after timeout": {d: Definition{Steps: []Step{trig, wait, send, send2},
			Connections: []Connection{cn("trig", "wait", ""), cn("wait", "send", Timeout), cn("wait", "send2", Default)}},
			key: "wait", msg: "not both"},
		"wait_for_event event_received after default": {d: Definition{Steps: []Step{trig, wait, send, send2},
			Connections: []Connection{cn("trig", "wait", ""), cn("wait", "send", ""), cn("wait", "send2", EventReceived)}},
			key: "wait", msg: "not both"},
		"wait_for_event timeout after default": {d: Definition{Steps: []Step{trig, wait, send, send2},
			Connections: []Connection{cn("trig", "wait", ""), cn("wait", "send", Default), cn("wait", "send2", Timeout)}},
			key: "wait", msg: "not both"},

		// reachability
		"unreachable step": {d: Definition{Steps: []Step{trig, send, send2},
			Connections: []Connection{cn("trig", "send", "")}}, key: "send2", msg: "no connection from the trigger reaches"},
		"step with no connection at all": {d: Definition{Steps: []Step{trig, send}}, key: "send", msg: "reaches"},
		"unreachable island with its own edges": {d: Definition{Steps: []Step{trig, send, delay, send2},
			Connections: []Connection{cn("trig", "send", ""), cn("delay", "send2", "")}}, key: "delay", msg: "reaches"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.d.Validate()
			require.Error(t, err)
			var se *StepError
			require.True(t, errors.As(err, &se), "%T is not a *StepError", err)
			require.Equal(t, c.key, se.Key, "%v", err)
			require.Contains(t, se.Msg, c.msg)
			if c.key != "" {
				require.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("step %q: ", c.key)), err.Error())
			} else {
				require.Equal(t, se.Msg, err.Error())
			}
		})
	}
}

// A cycle that waits nowhere fails, naming a step on it.
func TestValidateCycleWithoutWait(t *testing.T) {
	for name, c := range map[string]struct {
		d     Definition
		cycle []string
	}{
		"two steps": {
			d: Definition{Steps: []Step{trig, send, cond},
				Connections: []Connection{cn("trig", "send", ""), cn("send", "cond", ""), cn("cond", "send", ConditionMet)}},
			cycle: []string{"send", "cond"},
		},
		"three steps after a delay": {
			d: Definition{Steps: []Step{trig, delay, send, update, cond},
				Connections: []Connection{cn("trig", "delay", ""), cn("delay", "send", ""), cn("send", "update", ""),
					cn("update", "cond", ""), cn("cond", "send", ConditionNotMet)}},
			cycle: []string{"send", "update", "cond"},
		},
		// One loop waits, but a shorter loop inside it does not.
		"an inner loop without the outer loop's delay": {
			d: Definition{Steps: []Step{trig, send, cond, delay},
				Connections: []Connection{cn("trig", "send", ""), cn("send", "cond", ""),
					cn("cond", "send", ConditionMet), cn("cond", "delay", ConditionNotMet), cn("delay", "send", "")}},
			cycle: []string{"send", "cond"},
		},
		"a loop through a condition's other branch": {
			d: Definition{Steps: []Step{trig, cond, send, send2},
				Connections: []Connection{cn("trig", "cond", ""), cn("cond", "send", ConditionMet),
					cn("cond", "send2", ConditionNotMet), cn("send2", "cond", "")}},
			cycle: []string{"cond", "send2"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.d.Validate()
			var se *StepError
			require.True(t, errors.As(err, &se), "%v", err)
			require.Contains(t, se.Msg, "loop without a delay or wait_for_event")
			require.Contains(t, c.cycle, se.Key, "the step named is on the loop")
		})
	}
}

func TestDefinitionAccessors(t *testing.T) {
	d := full()
	s, ok := d.Step("wait")
	require.True(t, ok)
	require.Equal(t, WaitForEvent, s.Type)
	_, ok = d.Step("ghost")
	require.False(t, ok)
	tr, ok := d.TriggerStep()
	require.True(t, ok)
	require.Equal(t, "trig", tr.Key)
	require.Equal(t, "user.created", d.EventName())
	require.True(t, d.Has(WaitForEvent))
	require.False(t, Definition{Steps: []Step{send}}.Has(WaitForEvent))
	require.Equal(t, "", Definition{Steps: []Step{send}}.EventName())
	require.Equal(t, "", Definition{Steps: []Step{st("t", Trigger, `nope`)}}.EventName())

	// routes checks where route leads from a step by an outcome: each
	// case is {from, outcome, to}, "" for nowhere.
	routes := func(route func(from, outcome string) (string, bool), cases ...[3]string) {
		t.Helper()
		for _, c := range cases {
			to, ok := route(c[0], c[1])
			require.Equal(t, c[2], to, "%s --%s-->", c[0], c[1])
			require.Equal(t, c[2] != "", ok)
		}
	}
	routes(d.Next,
		[3]string{"trig", Default, "cond"},
		[3]string{"cond", ConditionMet, "send"},
		[3]string{"cond", ConditionNotMet, "update"},
		[3]string{"send", Default, "delay"}, // a connection with type "" is a default one
		[3]string{"wait", EventReceived, "segment"},
		[3]string{"wait", Timeout, "wait2"},
		[3]string{"cond", Default, ""},
		[3]string{"remove", Default, ""},
		[3]string{"ghost", Default, ""})
	// Follow: an event received leaves by the default connection when the
	// step has none of its own; no other outcome falls back.
	f := Definition{Connections: []Connection{{From: "w", To: "a", Type: Default}, {From: "w", To: "b", Type: Timeout},
		{From: "e", To: "c", Type: EventReceived}, {From: "e", To: "d", Type: Default}}}
	routes(f.Follow,
		[3]string{"w", EventReceived, "a"},
		[3]string{"w", Timeout, "b"},
		[3]string{"w", Default, "a"},
		[3]string{"e", EventReceived, "c"},
		[3]string{"e", Timeout, ""},
		[3]string{"b", ConditionMet, ""},
		[3]string{"c", EventReceived, ""})
	require.Equal(t, `step "k": boom`, (&StepError{Key: "k", Msg: "boom"}).Error())
	require.Equal(t, "boom", (&StepError{Msg: "boom"}).Error())
}

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"1 s":             time.Second,
		"1 second":        time.Second,
		"45 secs":         45 * time.Second,
		"30 minutes":      30 * time.Minute,
		"30m":             30 * time.Minute,
		"1 min":           time.Minute,
		"2 hours":         2 * time.Hour,
		"1 hour":          time.Hour,
		"12h":             12 * time.Hour,
		"3 hrs":           3 * time.Hour,
		"2 days":          2 * day,
		"1 day":           day,
		"3d":              3 * day,
		"1 week":          7 * day,
		"1w":              7 * day,
		"4 weeks":         28 * day,
		"30 days":         30 * day,
		"720 hours":       30 * day,
		"43200 minutes":   30 * day,
		"2592000 seconds": 30 * day,
		"  2 Days ":       2 * day,
		"2days":           2 * day,
		"2   DAYS":        2 * day,
		"0030 minutes":    30 * time.Minute,
	} {
		got, err := ParseDuration(in)
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "%q", in)
	}
	for in, msg := range map[string]string{
		"":                "not a duration",
		"   ":             "not a duration",
		"soon":            "not a duration",
		"2":               "not a duration",
		"days":            "not a duration",
		"2.5 hours":       "not a duration",
		"-1 day":          "not a duration",
		"+1 day":          "not a duration",
		"2 days 3 hours":  "not a duration",
		"1h30m":           "not a duration",
		"12345678 s":      "not a duration", // more than 7 digits
		"2 días":          "not a duration",
		"1 month":         `unknown unit "month"`,
		"1 year":          `unknown unit "year"`,
		"3 ms":            `unknown unit "ms"`,
		"0 days":          "not longer than zero",
		"0s":              "not longer than zero",
		"0000000 weeks":   "not longer than zero",
		"31 days":         "maximum of 30 days",
		"5 weeks":         "maximum of 30 days",
		"721 hours":       "maximum of 30 days",
		"43201 minutes":   "maximum of 30 days",
		"2592001 seconds": "maximum of 30 days",
		"9999999 weeks":   "maximum of 30 days", // overflows time.Duration
		"9999999 days":    "maximum of 30 days",
	} {
		_, err := ParseDuration(in)
		require.Error(t, err, "%q", in)
		require.Contains(t, err.Error(), msg, "%q", in)
	}
}

func TestValidateEventName(t *testing.T) {
	for _, ok := range []string{"user.created", "payment.completed", "a", "Resend.x", "resend-x", "x:resend:y",
		strings.Repeat("e", MaxEventName), "événement"} {
		require.NoError(t, ValidateEventName(ok), "%q", ok)
	}
	for name, msg := range map[string]string{
		"":                                  "required",
		" ":                                 "required",
		"resend:email.sent":                 "reserved",
		"Resend:x":                          "reserved",
		"RESEND:":                           "reserved",
		"user created":                      "no spaces",
		"user\tcreated":                     "no spaces",
		"user\x7f":                          "no spaces",
		"\x00":                              "no spaces",
		strings.Repeat("e", MaxEventName+1): "at most 128",
	} {
		err := ValidateEventName(name)
		require.Error(t, err, "%q", name)
		require.Contains(t, err.Error(), msg, "%q", name)
		var se *StepError
		require.False(t, errors.As(err, &se), "ValidateEventName names no step")
		require.False(t, strings.HasPrefix(err.Error(), "step "), err.Error())
	}
}

// leaf is a rule comparing field with value (JSON text; "" for none).
func leaf(field, op, value string) Rule {
	r := Rule{Type: RuleLeaf, Field: field, Operator: op}
	if value != "" {
		r.Value = json.RawMessage(value)
	}
	return r
}

// ruleData is what the rule tests read.
func ruleData() Data {
	var d Data
	if err := json.Unmarshal([]byte(`{
		"event": {
			"plan": "pro", "count": 3, "amount": "42.5", "zero": 0, "flag": true, "off": false,
			"title": "Hello world", "empty": "", "nothing": null, "none": [], "blank": {},
			"tags": ["a", "b", 7], "nested": {"city": "Paris", "deep": {"n": "10"}}
		},
		"contact": {
			"email": "ada@example.com", "first_name": "Ada", "unsubscribed": false, "company": null,
			"properties": {"plan": "free", "seats": "10", "company": "Acme"}
		},
		"wait_events": {
			"payment.completed": {"amount": 99, "currency": "EUR"},
			"payment": {"kind": "short"},
			"verified": {"at": "2026-01-01"}
		}
	}`), &d); err != nil {
		panic(err)
	}
	return d
}

func TestRuleEval(t *testing.T) {
	d := ruleData()
	for _, c := range []struct {
		r    Rule
		want bool
	}{
		// eq / neq
		{leaf("event.plan", "eq", `"pro"`), true},
		{leaf("event.plan", "eq", `"Pro"`), false},
		{leaf("event.plan", "eq", `"free"`), false},
		{leaf("event.absent", "eq", `"pro"`), false},
		{leaf("event.absent", "eq", `null`), false},
		{leaf("event.nothing", "eq", `null`), true},
		{leaf("event.count", "eq", `3`), true},
		{leaf("event.count", "eq", `3.0`), true},
		{leaf("event.count", "eq", `"3"`), true},   // a number equals a string that holds it
		{leaf("event.amount", "eq", `42.5`), true}, // and a numeric string a number
		{leaf("event.amount", "eq", `"42.50"`), false},
		{leaf("event.count", "eq", `"three"`), false},
		{leaf("event.flag", "eq", `true`), true},
		{leaf("event.flag", "eq", `"true"`), false},
		{leaf("event.off", "eq", `false`), true},
		{leaf("event.zero", "eq", `false`), false},
		{leaf("event.zero", "eq", `null`), false},
		{leaf("event.tags", "eq", `"a"`), false},
		{leaf("event.plan", "neq", `"free"`), true},
		{leaf("event.plan", "neq", `"pro"`), false},
		{leaf("event.absent", "neq", `"pro"`), true},
		{leaf("event.count", "neq", `"3"`), false},
		{leaf("event.nothing", "neq", `null`), false},
		// gt gte lt lte
		{leaf("event.count", "gt", `2`), true},
		{leaf("event.count", "gt", `3`), false},
		{leaf("event.count", "gte", `3`), true},
		{leaf("event.count", "gte", `3.5`), false},
		{leaf("event.count", "lt", `3`), false},
		{leaf("event.count", "lt", `10`), true},
		{leaf("event.count", "lte", `3`), true},
		{leaf("event.count", "lte", `-1`), false},
		{leaf("event.amount", "gt", `42`), true}, // a numeric string compares as its number
		{leaf("event.amount", "lt", `42`), false},
		{leaf("event.nested.deep.n", "gte", `10`), true},
		{leaf("contact.seats", "gte", `10`), true},
		{leaf("event.plan", "gt", `0`), false}, // not a number
		{leaf("event.plan", "lte", `0`), false},
		{leaf("event.flag", "gt", `0`), false},
		{leaf("event.nothing", "lt", `1`), false},
		{leaf("event.absent", "gt", `-1`), false},
		{leaf("event.absent", "lt", `1`), false},
		// contains starts_with ends_with
		{leaf("event.title", "contains", `"world"`), true},
		{leaf("event.title", "contains", `"World"`), false},
		{leaf("event.title", "contains", `""`), true},
		{leaf("event.tags", "contains", `"a"`), true}, // an element of an array
		{leaf("event.tags", "contains", `"c"`), false},
		{leaf("event.tags", "contains", `"7"`), true}, // a number element equals its string
		{leaf("event.tags", "contains", `"ab"`), false},
		{leaf("event.none", "contains", `"a"`), false},
		{leaf("event.count", "contains", `"3"`), false}, // a number is no string
		{leaf("event.absent", "contains", `""`), false},
		{leaf("event.nothing", "contains", `""`), false},
		{leaf("event.title", "starts_with", `"Hello"`), true},
		{leaf("event.title", "starts_with", `"world"`), false},
		{leaf("event.tags", "starts_with", `"a"`), false}, // only contains reads arrays
		{leaf("event.absent", "starts_with", `""`), false},
		{leaf("event.title", "ends_with", `"world"`), true},
		{leaf("event.title", "ends_with", `"Hello"`), false},
		{leaf("event.absent", "ends_with", `""`), false},
		{leaf("contact.email", "ends_with", `"@example.com"`), true},
		// exists is_empty
		{leaf("event.plan", "exists", ""), true},
		{leaf("event.empty", "exists", ""), true},
		{leaf("event.zero", "exists", ""), true},
		{leaf("event.off", "exists", ""), true},
		{leaf("event.nothing", "exists", ""), false},
		{leaf("event.absent", "exists", ""), false},
		{leaf("event.plan.x", "exists", ""), false}, // a path through a string
		{leaf("event.empty", "is_empty", ""), true},
		{leaf("event.nothing", "is_empty", ""), true},
		{leaf("event.absent", "is_empty", ""), true},
		{leaf("event.none", "is_empty", ""), true},
		{leaf("event.blank", "is_empty", ""), true},
		{leaf("event.plan", "is_empty", ""), false},
		{leaf("event.zero", "is_empty", ""), false},
		{leaf("event.off", "is_empty", ""), false},
		{leaf("event.tags", "is_empty", ""), false},
		{leaf("event.nested", "is_empty", ""), false},
		// paths and namespaces
		{leaf("event.nested.city", "eq", `"Paris"`), true},
		{leaf("event.nested.missing", "exists", ""), false},
		{leaf("payload.plan", "eq", `"pro"`), true}, // payload is event
		{leaf("payload.nested.city", "eq", `"Paris"`), true},
		{leaf("contact.first_name", "eq", `"Ada"`), true},
		{leaf("contact.unsubscribed", "eq", `false`), true},
		{leaf("contact.plan", "eq", `"free"`), true}, // falls back to the contact's properties
		{leaf("contact.properties.plan", "eq", `"free"`), true},
		{leaf("contact.company", "eq", `null`), true}, // the contact's own field comes first
		{leaf("contact.company", "eq", `"Acme"`), false},
		{leaf("contact.properties.company", "eq", `"Acme"`), true},
		{leaf("contact.missing", "exists", ""), false},
		{leaf("contact.missing", "is_empty", ""), true},
		{leaf("wait_events.payment.completed.amount", "gte", `99`), true}, // an event name with a dot
		{leaf("wait_events.payment.completed.currency", "eq", `"EUR"`), true},
		{leaf("wait_events.payment.kind", "eq", `"short"`), true},
		{leaf("wait_events.verified.at", "starts_with", `"2026"`), true},
		{leaf("wait_events.verified.missing", "exists", ""), false},
		{leaf("wait_events.refunded.amount", "exists", ""), false},
		{leaf("wait_events.refunded.amount", "is_empty", ""), true},
		{leaf("unknown.x", "exists", ""), false},
		// and / or
		{Rule{Type: RuleAnd, Rules: []Rule{leaf("event.plan", "eq", `"pro"`), leaf("event.count", "gt", `1`)}}, true},
		{Rule{Type: RuleAnd, Rules: []Rule{leaf("event.plan", "eq", `"pro"`), leaf("event.count", "gt", `5`)}}, false},
		{Rule{Type: RuleOr, Rules: []Rule{leaf("event.plan", "eq", `"free"`), leaf("event.count", "gt", `1`)}}, true},
		{Rule{Type: RuleOr, Rules: []Rule{leaf("event.plan", "eq", `"free"`), leaf("event.count", "gt", `5`)}}, false},
		{Rule{Type: RuleAnd}, true},
		{Rule{Type: RuleOr}, false},
		{Rule{Type: RuleAnd, Rules: []Rule{
			leaf("contact.plan", "eq", `"free"`),
			{Type: RuleOr, Rules: []Rule{
				leaf("event.absent", "exists", ""),
				{Type: RuleAnd, Rules: []Rule{leaf("event.tags", "contains", `"b"`), leaf("event.nested.city", "neq", `"Lyon"`)}},
			}},
		}}, true},
		{Rule{Type: RuleOr, Rules: []Rule{
			leaf("event.absent", "exists", ""),
			{Type: RuleAnd, Rules: []Rule{leaf("event.tags", "contains", `"b"`), leaf("event.nested.city", "eq", `"Lyon"`)}},
		}}, false},
		// an operator Validate would refuse
		{leaf("event.plan", "like", `"pro"`), false},
	} {
		b, _ := json.Marshal(c.r)
		require.Equal(t, c.want, c.r.Eval(d), "%s", b)
	}
}

// The rules the tests evaluate are the rules Validate accepts.
func TestRuleEvalOfDecodedRule(t *testing.T) {
	d := linear(cond)
	require.NoError(t, d.Validate())
	var r Rule
	require.NoError(t, json.Unmarshal(cond.Config, &r))
	data := ruleData()
	require.False(t, r.Eval(data), "contact.plan is free")
	data.Contact["plan"] = "pro"
	require.True(t, r.Eval(data), "the contact's own plan, then event.n absent but the payment's amount exists")
	delete(data.WaitEvents, "payment.completed")
	require.False(t, r.Eval(data))
	data.Event["n"] = 1.0
	require.True(t, r.Eval(data))
}

func TestResolve(t *testing.T) {
	d := ruleData()
	for _, c := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`"static"`, `"static"`, true},
		{`42`, `42`, true},
		{`null`, `null`, true},
		{`true`, `true`, true},
		{`[1,2]`, `[1,2]`, true},
		{`{"a":1}`, `{"a":1}`, true},
		{`{"var":"event.x","other":1}`, `{"var":"event.x","other":1}`, true}, // not a reference
		{`{"var":"event.plan"}`, `"pro"`, true},
		{` {"var": "event.count"} `, `3`, true},
		{`{"var":"payload.plan"}`, `"pro"`, true},
		{`{"var":"event.nested"}`, `{"city":"Paris","deep":{"n":"10"}}`, true},
		{`{"var":"event.tags"}`, `["a","b",7]`, true},
		{`{"var":"event.nothing"}`, `null`, true},
		{`{"var":"contact.first_name"}`, `"Ada"`, true},
		{`{"var":"contact.plan"}`, `"free"`, true},
		{`{"var":"wait_events.payment.completed.amount"}`, `99`, true},
		{`{"var":"event.absent"}`, ``, false},
		{`{"var":"contact.absent"}`, ``, false},
		{`{"var":"wait_events.refunded.amount"}`, ``, false},
		{`{"var":5}`, ``, false}, // not a valid reference
		{`{"var":`, ``, false},
	} {
		got, ok := Resolve(json.RawMessage(c.raw), d)
		require.Equal(t, c.ok, ok, "%s", c.raw)
		if c.ok {
			require.JSONEq(t, c.want, string(got), "%s", c.raw)
		} else {
			require.Nil(t, got, "%s", c.raw)
		}
	}
	// A static value comes back as it is, spaces included.
	got, ok := Resolve(json.RawMessage(` "x" `), Data{})
	require.True(t, ok)
	require.Equal(t, ` "x" `, string(got))
}

// FuzzValidate: Validate never panics on any definition, and a definition
// it accepts is walkable: every outcome of every step reached from the
// trigger leads to a step that exists, and the trigger's event is valid.
func FuzzValidate(f *testing.F) {
	seeds := []Definition{
		full(),
		linear(send),
		linear(cond),
		{Steps: []Step{trig, send, delay}, Connections: []Connection{cn("trig", "send", ""), cn("send", "delay", ""), cn("delay", "send", "")}},
		{Steps: []Step{trig, send, cond}, Connections: []Connection{cn("trig", "send", ""), cn("send", "cond", ""), cn("cond", "send", ConditionMet)}},
		{Steps: []Step{trig, wait, send, send2}, Connections: []Connection{cn("trig", "wait", ""), cn("wait", "send", EventReceived), cn("wait", "send2", "")}},
		{Steps: []Step{trig}, Connections: []Connection{cn("trig", "trig", "")}},
		{},
	}
	for _, d := range seeds {
		b, err := json.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"steps":[{"key":"t","type":"trigger","config":{"event_name":"e"}},{"key":"c","type":"condition","config":` +
		nested(MaxRuleDepth+1) + `}],"connections":[{"from":"t","to":"c"}]}`))
	f.Add([]byte(`{"steps":[{"key":"t","type":"trigger","config":null},{"key":"d","type":"delay","config":{"duration":"9999999 weeks"}}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Definition
		if json.Unmarshal(b, &d) != nil {
			return
		}
		if d.Validate() != nil {
			return
		}
		tr, ok := d.TriggerStep()
		if !ok {
			t.Fatal("a valid definition has a trigger")
		}
		if err := ValidateEventName(d.EventName()); err != nil {
			t.Fatalf("a valid definition's event: %v", err)
		}
		seen := map[string]bool{tr.Key: true}
		queue := []string{tr.Key}
		for len(queue) > 0 {
			k := queue[0]
			queue = queue[1:]
			s, ok := d.Step(k)
			if !ok {
				t.Fatalf("Next led to %q, which does not exist", k)
			}
			if s.Type == Trigger && k != tr.Key {
				t.Fatalf("Next led into a trigger %q", k)
			}
			for _, o := range outcomes[s.Type] {
				n, ok := d.Next(k, o)
				if !ok {
					continue
				}
				if n == k {
					t.Fatalf("%q leads to itself", k)
				}
				if !seen[n] {
					seen[n] = true
					queue = append(queue, n)
				}
			}
		}
		if len(seen) != len(d.Steps) {
			t.Fatalf("Next from the trigger reaches %d of %d steps", len(seen), len(d.Steps))
		}
		// No step comes back to itself without passing a wait.
		for _, from := range d.Steps {
			if waits[from.Type] {
				continue
			}
			again := map[string]bool{}
			queue := []string{from.Key}
			for len(queue) > 0 {
				k := queue[0]
				queue = queue[1:]
				s, _ := d.Step(k)
				for _, o := range outcomes[s.Type] {
					n, ok := d.Next(k, o)
					if !ok {
						continue
					}
					if n == from.Key {
						t.Fatalf("%q comes back to itself without a wait", from.Key)
					}
					if ns, _ := d.Step(n); !waits[ns.Type] && !again[n] {
						again[n] = true
						queue = append(queue, n)
					}
				}
			}
		}
		// Each step's config is valid, so the run reads it.
		for _, s := range d.Steps {
			switch s.Type {
			case Delay:
				var c DelayConfig
				if json.Unmarshal(s.Config, &c) != nil {
					t.Fatalf("%q: config", s.Key)
				}
				if dur, err := ParseDuration(c.Duration); err != nil || dur <= 0 || dur > MaxWait {
					t.Fatalf("%q: duration %v %v", s.Key, dur, err)
				}
			case WaitForEvent:
				var c WaitForEventConfig
				if json.Unmarshal(s.Config, &c) != nil {
					t.Fatalf("%q: config", s.Key)
				}
				if c.FilterRule != nil {
					c.FilterRule.Eval(Data{}) // never panics
				}
			case Condition:
				var r Rule
				if json.Unmarshal(s.Config, &r) != nil {
					t.Fatalf("%q: config", s.Key)
				}
				r.Eval(Data{})
			}
		}
	})
}
