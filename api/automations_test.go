package api_test

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// The api tests run no Temporal worker: a run an event starts stays
// running with no steps taken. The AutomationRun workflow is tested in
// package workflows.

func autoStep(key, typ string, config map[string]any) map[string]any {
	return map[string]any{"key": key, "type": typ, "config": config}
}

func autoConn(from, to, typ string) map[string]any {
	c := map[string]any{"from": from, "to": to}
	if typ != "" {
		c["type"] = typ
	}
	return c
}

func trigger(event string) map[string]any {
	return autoStep("start", "trigger", map[string]any{"event_name": event})
}

// publishedTemplate creates a template of the key's team with alias and,
// when publish, publishes it; it returns its id.
func (e *env) publishedTemplate(key, alias string, publish bool) string {
	e.t.Helper()
	id := e.created("/templates", key, map[string]any{"name": alias, "alias": alias,
		"from": "Acme <onboarding@posthaste.test>", "subject": "Hi {{{NAME}}}", "html": "<p>Hi {{{NAME}}}</p>",
		"variables": []map[string]any{{"key": "NAME", "type": "string", "fallback_value": "friend"}}})
	if publish {
		r := e.do("POST", "/templates/"+id+"/publish", key, nil)
		require.Equal(e.t, 200, r.status, string(r.raw))
	}
	return id
}

// sendEvent posts an event and returns the answer's runs.
func (e *env) sendEvent(key string, body map[string]any) (contact string, runs []string) {
	e.t.Helper()
	r := e.do("POST", "/events/send", key, body)
	require.Equal(e.t, 202, r.status, string(r.raw))
	require.Equal(e.t, "event", r.body["object"])
	require.Equal(e.t, body["event"], r.body["event"])
	require.NoError(e.t, uuid.Validate(r.body["id"].(string)))
	for _, id := range r.body["runs"].([]any) {
		runs = append(runs, id.(string))
	}
	return r.body["contact_id"].(string), runs
}

// runsOf lists an automation's runs (query: "" or "?status=…") by id.
func (e *env) runsOf(key, automation, query string) map[string]map[string]any {
	e.t.Helper()
	r := e.do("GET", "/automations/"+automation+"/runs"+query, key, nil)
	require.Equal(e.t, 200, r.status, string(r.raw))
	require.Equal(e.t, "list", r.body["object"])
	out := map[string]map[string]any{}
	for _, d := range r.body["data"].([]any) {
		m := d.(map[string]any)
		out[m["id"].(string)] = m
	}
	return out
}

// TestAutomationValidation: a definition that cannot run is a 422 naming
// the step at fault, and nothing is saved.
func TestAutomationValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	draft := e.publishedTemplate(e.keyA, "draft-tpl", false)
	otherSegment := e.newSegment(e.keyB, "B's")
	otherTemplate := e.publishedTemplate(e.keyB, "b-tpl", true)
	update := func(key string) map[string]any {
		return autoStep(key, "contact_update", map[string]any{"first_name": "Ada"})
	}
	cases := []struct {
		name  string
		steps []map[string]any
		conns []map[string]any
		want  []string // in the message
	}{
		{"unknown type", []map[string]any{trigger("a.b"), autoStep("beam", "teleport", map[string]any{})},
			[]map[string]any{autoConn("start", "beam", "")}, []string{`step "beam"`, `unknown step type "teleport"`}},
		{"two triggers", []map[string]any{trigger("a.b"), autoStep("again", "trigger", map[string]any{"event_name": "c.d"})},
			nil, []string{"exactly one trigger step (it has 2)"}},
		{"unreachable step", []map[string]any{trigger("a.b"), update("reached"), update("island")},
			[]map[string]any{autoConn("start", "reached", "")}, []string{`step "island"`, "no connection from the trigger reaches"}},
		{"loop without wait", []map[string]any{trigger("a.b"), update("ping"), update("pong")},
			[]map[string]any{autoConn("start", "ping", ""), autoConn("ping", "pong", ""), autoConn("pong", "ping", "")},
			[]string{"on a loop without a delay or wait_for_event"}},
		{"wrong connection type", []map[string]any{trigger("a.b"), update("next")},
			[]map[string]any{autoConn("start", "next", "condition_met")},
			[]string{`step "start"`, `a trigger step has no "condition_met" connection`}},
		{"condition by default", []map[string]any{trigger("a.b"), autoStep("check", "condition",
			map[string]any{"type": "rule", "field": "event.plan", "operator": "eq", "value": "pro"}), update("next")},
			[]map[string]any{autoConn("start", "check", ""), autoConn("check", "next", "default")},
			[]string{`step "check"`, `a condition step has no "default" connection`}},
		{"unknown template", []map[string]any{trigger("a.b"), autoStep("mail", "send_email",
			map[string]any{"template": map[string]any{"id": "nope"}})},
			[]map[string]any{autoConn("start", "mail", "")}, []string{`step "mail"`, `the team has no published template "nope"`}},
		{"draft template", []map[string]any{trigger("a.b"), autoStep("mail", "send_email",
			map[string]any{"template": map[string]any{"id": draft}})},
			[]map[string]any{autoConn("start", "mail", "")}, []string{`step "mail"`, "no published template"}},
		{"another team's template", []map[string]any{trigger("a.b"), autoStep("mail", "send_email",
			map[string]any{"template": map[string]any{"id": otherTemplate}})},
			[]map[string]any{autoConn("start", "mail", "")}, []string{`step "mail"`, "no published template"}},
		{"unknown segment", []map[string]any{trigger("a.b"), autoStep("seg", "add_to_segment",
			map[string]any{"segment_id": uuid.NewString()})},
			[]map[string]any{autoConn("start", "seg", "")}, []string{`step "seg"`, "the team has no segment"}},
		{"another team's segment", []map[string]any{trigger("a.b"), autoStep("seg", "add_to_segment",
			map[string]any{"segment_id": otherSegment})},
			[]map[string]any{autoConn("start", "seg", "")}, []string{`step "seg"`, "the team has no segment " + otherSegment}},
		{"bad duration", []map[string]any{trigger("a.b"), autoStep("wait", "delay", map[string]any{"duration": "3 fortnights"})},
			[]map[string]any{autoConn("start", "wait", "")}, []string{`step "wait"`, `unknown unit "fortnights"`}},
		{"delay over 30 days", []map[string]any{trigger("a.b"), autoStep("wait", "delay", map[string]any{"duration": "31 days"})},
			[]map[string]any{autoConn("start", "wait", "")}, []string{`step "wait"`, "longer than the maximum of 30 days"}},
		{"wait timeout over 30 days", []map[string]any{trigger("a.b"), autoStep("await", "wait_for_event",
			map[string]any{"event_name": "c.d", "timeout": "5 weeks"})},
			[]map[string]any{autoConn("start", "await", "")}, []string{`step "await"`, "longer than the maximum of 30 days"}},
		{"contact_delete with an outgoing connection", []map[string]any{trigger("a.b"),
			autoStep("forget", "contact_delete", map[string]any{}), update("after")},
			[]map[string]any{autoConn("start", "forget", ""), autoConn("forget", "after", "")},
			[]string{`step "forget"`, "no connection may leave it"}},
		{"reserved trigger event", []map[string]any{autoStep("start", "trigger", map[string]any{"event_name": "resend:email.sent"})},
			nil, []string{`step "start"`, `"resend:" are reserved`}},
		{"unknown config field", []map[string]any{autoStep("start", "trigger", map[string]any{"eventName": "a.b"})},
			nil, []string{`step "start"`, `unknown field "eventName"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := map[string]any{"name": c.name, "status": "enabled", "steps": c.steps, "connections": c.conns}
			if c.conns == nil {
				body["connections"] = []any{}
			}
			r := e.do("POST", "/automations", e.keyA, body)
			requireError(t, r, 422, "validation_error")
			for _, w := range c.want {
				require.Contains(t, r.body["message"], w)
			}
		})
	}
	requireError(t, e.do("POST", "/automations", e.keyA, map[string]any{"steps": []any{trigger("a.b")}}),
		422, "missing_required_field")
	requireError(t, e.do("POST", "/automations", e.keyA, map[string]any{"name": "No steps"}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/automations", e.keyA, map[string]any{"name": "Bad", "status": "paused",
		"steps": []any{trigger("a.b")}}), 422, "validation_error")
	requireError(t, e.do("POST", "/automations", e.keyA, map[string]any{"name": "Empty", "steps": []any{}}),
		422, "validation_error")
	l := e.do("GET", "/automations", e.keyA, nil)
	require.Equal(t, 200, l.status, string(l.raw))
	require.Empty(t, l.body["data"], "refused definitions leave nothing behind")

	// A valid automation refuses an invalid update, and keeps its steps.
	id := e.created("/automations", e.keyA, map[string]any{"name": "Ok", "steps": []any{trigger("a.b")}})
	r := e.do("PATCH", "/automations/"+id, e.keyA, map[string]any{"steps": []any{trigger("a.b"),
		autoStep("wait", "delay", map[string]any{"duration": "3 fortnights"})},
		"connections": []any{autoConn("start", "wait", "")}})
	requireError(t, r, 422, "validation_error")
	require.Contains(t, r.body["message"], `step "wait"`)
	g := e.do("GET", "/automations/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Len(t, g.body["steps"], 1)
	require.Equal(t, []any{}, g.body["connections"], "a trigger alone has no connections, and says so")
	requireError(t, e.do("GET", "/automations/not-a-uuid", e.keyA, nil), 422, "invalid_parameter")
	requireError(t, e.do("GET", "/automations?status=bogus", e.keyA, nil), 422, "validation_error")
}

// TestEventValidation: the 422s of /events and /events/send, each naming
// the field.
func TestEventValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.created("/events", e.keyA, map[string]any{"name": "order.placed",
		"schema": map[string]string{"amount": "number", "gift": "boolean", "on": "date", "sku": "string"}})

	for _, c := range []struct {
		name    string
		body    any
		errName string
		want    string
	}{
		{"reserved name", map[string]any{"name": "resend:email.sent"}, "validation_error", `"resend:" are reserved`},
		{"name with a space", map[string]any{"name": "order placed"}, "validation_error", "`name`"},
		{"missing name", map[string]any{"schema": map[string]string{"a": "string"}}, "missing_required_field", "`name`"},
		{"bad schema type", map[string]any{"name": "x.y", "schema": map[string]string{"plan": "text"}}, "validation_error",
			`Schema field "plan" has type "text"`},
		{"schema not a map of types", map[string]any{"name": "x.y", "schema": []string{"plan"}}, "validation_error", "`schema`"},
		{"duplicate name", map[string]any{"name": "order.placed"}, "validation_error", `An event named "order.placed" already exists`},
	} {
		t.Run("create "+c.name, func(t *testing.T) {
			r := e.do("POST", "/events", e.keyA, c.body)
			requireError(t, r, 422, c.errName)
			require.Contains(t, r.body["message"], c.want)
		})
	}
	requireError(t, e.do("PATCH", "/events/order.placed", e.keyA, map[string]any{"schema": map[string]string{"a": "int"}}),
		422, "validation_error")

	contact := e.created("/contacts", e.keyA, map[string]any{"email": "ada@example.com"})
	for _, c := range []struct {
		name    string
		body    map[string]any
		errName string
		want    string
	}{
		{"payload not matching the schema", map[string]any{"event": "order.placed", "email": "ada@example.com",
			"payload": map[string]any{"amount": "ten"}}, "validation_error", "`payload.amount`"},
		{"bad date", map[string]any{"event": "order.placed", "email": "ada@example.com",
			"payload": map[string]any{"on": "yesterday"}}, "validation_error", "`payload.on`"},
		{"bad boolean", map[string]any{"event": "order.placed", "contact_id": contact,
			"payload": map[string]any{"gift": "yes"}}, "validation_error", "`payload.gift`"},
		{"payload not an object", map[string]any{"event": "order.placed", "email": "ada@example.com",
			"payload": []int{1}}, "validation_error", "`payload`"},
		{"both contact_id and email", map[string]any{"event": "order.placed", "email": "ada@example.com",
			"contact_id": contact}, "validation_error", "`contact_id` or `email`"},
		{"neither contact_id nor email", map[string]any{"event": "order.placed"}, "validation_error", "`contact_id` or `email`"},
		{"missing event", map[string]any{"email": "ada@example.com"}, "missing_required_field", "`event`"},
		{"reserved event", map[string]any{"event": "resend:contact.created", "email": "ada@example.com"},
			"validation_error", `"resend:" are reserved`},
		{"unknown contact", map[string]any{"event": "order.placed", "contact_id": uuid.NewString()},
			"validation_error", "The team has no contact"},
		{"another team's contact", map[string]any{"event": "order.placed",
			"contact_id": e.created("/contacts", e.keyB, map[string]any{"email": "bob@example.com"})},
			"validation_error", "The team has no contact"},
		{"bad address", map[string]any{"event": "order.placed", "email": "not an address"}, "", ""},
	} {
		t.Run("send "+c.name, func(t *testing.T) {
			r := e.do("POST", "/events/send", e.keyA, c.body)
			require.Equal(t, 422, r.status, string(r.raw))
			if c.errName != "" {
				requireError(t, r, 422, c.errName)
				require.Contains(t, r.body["message"], c.want)
			}
		})
	}
	// The payload's other fields and null values pass.
	_, runs := e.sendEvent(e.keyA, map[string]any{"event": "order.placed", "email": "ada@example.com",
		"payload": map[string]any{"amount": 10.5, "gift": false, "on": "2026-01-02", "sku": nil, "note": []int{1}}})
	require.Empty(t, runs)
	_, _ = e.sendEvent(e.keyA, map[string]any{"event": "order.placed", "contact_id": contact,
		"payload": map[string]any{"on": "2026-01-02T10:00:00Z"}})
}

// TestEventsCRUD: events by id and by name, their schema replaced and
// removed, deleted; another team sees none of them.
func TestEventsCRUD(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/events", e.keyA, map[string]any{"name": "user.signed_up",
		"schema": map[string]string{"plan": "string", "seats": "number"}})
	require.Equal(t, 201, r.status, string(r.raw))
	require.Equal(t, "event", r.body["object"])
	id := r.body["id"].(string)
	bare := e.created("/events", e.keyA, map[string]any{"name": "user.logged_in"})

	for _, ref := range []string{id, "user.signed_up"} {
		g := e.do("GET", "/events/"+ref, e.keyA, nil)
		require.Equal(t, 200, g.status, string(g.raw))
		require.Equal(t, "event", g.body["object"])
		require.Equal(t, id, g.body["id"])
		require.Equal(t, "user.signed_up", g.body["name"])
		require.Equal(t, map[string]any{"plan": "string", "seats": "number"}, g.body["schema"])
		require.Nil(t, g.body["updated_at"])
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, g.body["created_at"])
	}
	g := e.do("GET", "/events/user.logged_in", e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Contains(t, g.body, "schema")
	require.Nil(t, g.body["schema"])
	require.Equal(t, []string{bare, id}, listIDs(t, e.do("GET", "/events", e.keyA, nil)))
	l := e.do("GET", "/events?limit=1", e.keyA, nil)
	require.Equal(t, []string{bare}, listIDs(t, l))
	require.Equal(t, true, l.body["has_more"])
	require.Equal(t, []string{id}, listIDs(t, e.do("GET", "/events?limit=1&after="+bare, e.keyA, nil)))

	// Update by name, then by id.
	u := e.do("PATCH", "/events/user.signed_up", e.keyA, map[string]any{"schema": map[string]string{"plan": "string",
		"started": "date"}})
	require.Equal(t, 200, u.status, string(u.raw))
	require.Equal(t, map[string]any{"object": "event", "id": id}, u.body)
	g = e.do("GET", "/events/"+id, e.keyA, nil)
	require.Equal(t, map[string]any{"plan": "string", "started": "date"}, g.body["schema"])
	require.NotNil(t, g.body["updated_at"])
	u = e.do("PATCH", "/events/"+id, e.keyA, map[string]any{"schema": nil})
	require.Equal(t, 200, u.status, string(u.raw))
	g = e.do("GET", "/events/"+id, e.keyA, nil)
	require.Nil(t, g.body["schema"])
	// Without a schema, any payload goes.
	_, _ = e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "email": "ada@example.com",
		"payload": map[string]any{"started": "not a date"}})

	// Team B sees none of it, by id or by name, and may reuse the name.
	for _, ref := range []string{id, "user.signed_up"} {
		requireError(t, e.do("GET", "/events/"+ref, e.keyB, nil), 404, "not_found")
		requireError(t, e.do("PATCH", "/events/"+ref, e.keyB, map[string]any{"schema": nil}), 404, "not_found")
		requireError(t, e.do("DELETE", "/events/"+ref, e.keyB, nil), 404, "not_found")
	}
	require.Empty(t, listIDs(t, e.do("GET", "/events", e.keyB, nil)))
	e.created("/events", e.keyB, map[string]any{"name": "user.signed_up"})

	d := e.do("DELETE", "/events/user.signed_up", e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	require.Equal(t, map[string]any{"object": "event", "id": id, "deleted": true}, d.body)
	requireError(t, e.do("GET", "/events/"+id, e.keyA, nil), 404, "not_found")
	requireError(t, e.do("DELETE", "/events/"+id, e.keyA, nil), 404, "not_found")
	d = e.do("DELETE", "/events/"+bare, e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	require.Empty(t, listIDs(t, e.do("GET", "/events", e.keyA, nil)))
	require.Equal(t, 200, e.do("GET", "/events/user.signed_up", e.keyB, nil).status, "team B's event stays")
}

// TestEventSendCreatesContact: an event for an address that is not a
// contact makes it one; the next event finds it, by address or by id.
func TestEventSendCreatesContact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	requireError(t, e.do("GET", "/contacts/grace@example.com", e.keyA, nil), 404, "not_found")
	contact, runs := e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "email": "Grace@Example.com",
		"payload": map[string]any{"plan": "pro"}})
	require.Empty(t, runs, "no automation is triggered by it")
	g := e.do("GET", "/contacts/grace@example.com", e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, contact, g.body["id"])
	require.Equal(t, "grace@example.com", g.body["email"])

	again, _ := e.sendEvent(e.keyA, map[string]any{"event": "user.logged_in", "email": "grace@example.com"})
	require.Equal(t, contact, again)
	byID, _ := e.sendEvent(e.keyA, map[string]any{"event": "user.logged_in", "contact_id": contact})
	require.Equal(t, contact, byID)
	require.Len(t, listIDs(t, e.do("GET", "/contacts", e.keyA, nil)), 1)

	// Team B's event for the same address is a contact of team B's.
	other, _ := e.sendEvent(e.keyB, map[string]any{"event": "user.signed_up", "email": "grace@example.com"})
	require.NotEqual(t, contact, other)
	gb := e.do("GET", "/contacts/grace@example.com", e.keyB, nil)
	require.Equal(t, other, gb.body["id"])
}

// onboarding is an automation using each step type, triggered by
// user.signed_up.
func onboarding(template, segment string) map[string]any {
	return map[string]any{
		"name":   "Onboarding",
		"status": "enabled",
		"steps": []any{
			trigger("user.signed_up"),
			autoStep("wait", "delay", map[string]any{"duration": "2 days"}),
			autoStep("welcome", "send_email", map[string]any{"template": map[string]any{"id": template,
				"variables": map[string]any{"NAME": map[string]any{"var": "event.name"}}}}),
			autoStep("await", "wait_for_event", map[string]any{"event_name": "purchase.completed", "timeout": "7 days",
				"filter_rule": map[string]any{"type": "rule", "field": "event.amount", "operator": "gte", "value": 10}}),
			autoStep("is_pro", "condition", map[string]any{"type": "and", "rules": []any{
				map[string]any{"type": "rule", "field": "event.plan", "operator": "eq", "value": "pro"},
				map[string]any{"type": "rule", "field": "contact.email", "operator": "exists"}}}),
			autoStep("mark", "contact_update", map[string]any{"first_name": map[string]any{"var": "event.name"}}),
			autoStep("vip", "add_to_segment", map[string]any{"segment_id": segment}),
			autoStep("forget", "contact_delete", map[string]any{}),
		},
		"connections": []any{
			autoConn("start", "wait", ""),
			autoConn("wait", "welcome", "default"),
			autoConn("welcome", "await", ""),
			autoConn("await", "is_pro", "event_received"),
			autoConn("await", "forget", "timeout"),
			autoConn("is_pro", "mark", "condition_met"),
			autoConn("is_pro", "vip", "condition_not_met"),
			autoConn("mark", "vip", ""),
			autoConn("vip", "forget", ""),
		},
	}
}

// TestAutomationRuns: an event starts one run of each enabled automation
// it triggers, one per contact at a time; runs keep the version they
// started with; stop cancels the running runs; duplicate copies a
// definition; delete takes the runs with it; another team reaches none
// of it, and its events start none of team A's automations.
func TestAutomationRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := e.publishedTemplate(e.keyA, "welcome", true)
	seg := e.newSegment(e.keyA, "VIP")
	def := onboarding(tpl, seg)
	r := e.do("POST", "/automations", e.keyA, def)
	require.Equal(t, 201, r.status, string(r.raw))
	require.Equal(t, "automation", r.body["object"])
	id := r.body["id"].(string)
	off := e.created("/automations", e.keyA, map[string]any{"name": "Off", "steps": []any{trigger("user.signed_up")},
		"connections": []any{}})

	g := e.do("GET", "/automations/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, "Onboarding", g.body["name"])
	require.Equal(t, "enabled", g.body["status"])
	require.Nil(t, g.body["updated_at"])
	require.Equal(t, map[string]any{"running": 0.0, "completed": 0.0, "failed": 0.0, "cancelled": 0.0}, g.body["runs"])
	steps := g.body["steps"].([]any)
	require.Len(t, steps, 8)
	require.Equal(t, map[string]any{"key": "await", "type": "wait_for_event", "config": map[string]any{
		"event_name": "purchase.completed", "timeout": "7 days",
		"filter_rule": map[string]any{"type": "rule", "field": "event.amount", "operator": "gte", "value": 10.0}}}, steps[3])
	conns := g.body["connections"].([]any)
	require.Len(t, conns, 9)
	require.Equal(t, map[string]any{"from": "start", "to": "wait", "type": "default"}, conns[0], "an untyped connection is default")
	require.Equal(t, map[string]any{"from": "is_pro", "to": "vip", "type": "condition_not_met"}, conns[6])
	require.Equal(t, "disabled", e.do("GET", "/automations/"+off, e.keyA, nil).body["status"], "created disabled")

	l := e.do("GET", "/automations", e.keyA, nil)
	require.Equal(t, []string{off, id}, listIDs(t, l))
	require.NotContains(t, l.body["data"].([]any)[0], "steps", "lists leave the steps out")
	require.Equal(t, []string{id}, listIDs(t, e.do("GET", "/automations?status=enabled", e.keyA, nil)))
	require.Equal(t, []string{off}, listIDs(t, e.do("GET", "/automations?status=disabled", e.keyA, nil)))

	// One run for the enabled automation, none for the disabled one.
	ada, runs := e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "email": "ada@example.com",
		"payload": map[string]any{"name": "Ada", "plan": "pro"}})
	require.Len(t, runs, 1)
	first := runs[0]
	listed := e.runsOf(e.keyA, id, "")
	require.Len(t, listed, 1)
	run := listed[first]
	require.NotNil(t, run, "the run the answer named is listed")
	require.Equal(t, "automation_run", run["object"])
	require.Equal(t, "running", run["status"])
	require.Equal(t, ada, run["contact_id"])
	require.Equal(t, 1.0, run["version"])
	require.Nil(t, run["error"])
	require.Nil(t, run["completed_at"])
	require.Contains(t, run["workflow_id"], first)
	require.Empty(t, e.runsOf(e.keyA, off, ""), "a disabled automation starts no run")

	one := e.do("GET", "/automations/"+id+"/runs/"+first, e.keyA, nil)
	require.Equal(t, 200, one.status, string(one.raw))
	require.Equal(t, first, one.body["id"])
	require.Equal(t, run["event_id"], one.body["event_id"])
	require.Equal(t, []any{}, one.body["steps"], "no worker runs in these tests: no step is taken yet")
	requireError(t, e.do("GET", "/automations/"+id+"/runs/"+uuid.NewString(), e.keyA, nil), 404, "not_found")
	requireError(t, e.do("GET", "/automations/"+off+"/runs/"+first, e.keyA, nil), 404, "not_found")
	requireError(t, e.do("GET", "/automations/"+id+"/runs/nope", e.keyA, nil), 422, "invalid_parameter")

	// The same event for the same contact while its run runs starts none.
	again, runs := e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "contact_id": ada,
		"payload": map[string]any{"name": "Ada"}})
	require.Equal(t, ada, again)
	require.Empty(t, runs)
	require.Len(t, e.runsOf(e.keyA, id, ""), 1)
	// Another event name starts nothing either.
	_, runs = e.sendEvent(e.keyA, map[string]any{"event": "purchase.completed", "contact_id": ada,
		"payload": map[string]any{"amount": 20}})
	require.Empty(t, runs)

	// Team B: nothing of team A's, and its own event of the same name
	// starts no run of team A's automation.
	for _, c := range []struct{ method, path string }{
		{"GET", "/automations/" + id}, {"PATCH", "/automations/" + id}, {"DELETE", "/automations/" + id},
		{"POST", "/automations/" + id + "/stop"}, {"POST", "/automations/" + id + "/duplicate"},
		{"GET", "/automations/" + id + "/runs"}, {"GET", "/automations/" + id + "/runs/" + first},
	} {
		requireError(t, e.do(c.method, c.path, e.keyB, map[string]any{"name": "Mine"}), 404, "not_found")
	}
	require.Empty(t, listIDs(t, e.do("GET", "/automations", e.keyB, nil)))
	_, runs = e.sendEvent(e.keyB, map[string]any{"event": "user.signed_up", "email": "ada@example.com"})
	require.Empty(t, runs)
	require.Len(t, e.runsOf(e.keyA, id, ""), 1)

	// New steps are a new version: the running run keeps version 1, a
	// new run gets version 2.
	u := e.do("PATCH", "/automations/"+id, e.keyA, map[string]any{"name": "Onboarding v2",
		"steps":       []any{trigger("user.signed_up"), autoStep("wait", "delay", map[string]any{"duration": "1 hour"})},
		"connections": []any{autoConn("start", "wait", "")}})
	require.Equal(t, 200, u.status, string(u.raw))
	require.Equal(t, map[string]any{"object": "automation", "id": id}, u.body)
	g = e.do("GET", "/automations/"+id, e.keyA, nil)
	require.Equal(t, "Onboarding v2", g.body["name"])
	require.Len(t, g.body["steps"], 2)
	require.NotNil(t, g.body["updated_at"])
	require.Equal(t, 1.0, g.body["runs"].(map[string]any)["running"])
	grace, runs := e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "email": "grace@example.com"})
	require.Len(t, runs, 1)
	second := runs[0]
	listed = e.runsOf(e.keyA, id, "")
	require.Len(t, listed, 2)
	require.Equal(t, 1.0, listed[first]["version"], "a run keeps the version it started with")
	require.Equal(t, 2.0, listed[second]["version"])
	require.Equal(t, grace, listed[second]["contact_id"])
	require.Equal(t, []string{second, first}, listIDs(t, e.do("GET", "/automations/"+id+"/runs", e.keyA, nil)),
		"newest first")
	page := e.do("GET", "/automations/"+id+"/runs?limit=1", e.keyA, nil)
	require.Equal(t, []string{second}, listIDs(t, page))
	require.Equal(t, true, page.body["has_more"])
	require.Equal(t, []string{first}, listIDs(t, e.do("GET", "/automations/"+id+"/runs?limit=1&after="+second, e.keyA, nil)))
	// A rename alone is no new version.
	require.Equal(t, 200, e.do("PATCH", "/automations/"+id, e.keyA, map[string]any{"name": "Onboarding"}).status)
	require.Len(t, e.do("GET", "/automations/"+id, e.keyA, nil).body["steps"], 2)

	// Duplicate: a disabled copy with the same steps.
	dup := e.do("POST", "/automations/"+id+"/duplicate", e.keyA, nil)
	require.Equal(t, 200, dup.status, string(dup.raw))
	require.Equal(t, "automation", dup.body["object"])
	copyID := dup.body["id"].(string)
	require.NotEqual(t, id, copyID)
	gc := e.do("GET", "/automations/"+copyID, e.keyA, nil)
	require.Equal(t, "Onboarding (copy)", gc.body["name"])
	require.Equal(t, "disabled", gc.body["status"])
	g = e.do("GET", "/automations/"+id, e.keyA, nil)
	require.Equal(t, g.body["steps"], gc.body["steps"])
	require.Equal(t, g.body["connections"], gc.body["connections"])
	require.Equal(t, map[string]any{"running": 0.0, "completed": 0.0, "failed": 0.0, "cancelled": 0.0}, gc.body["runs"])
	require.Empty(t, e.runsOf(e.keyA, copyID, ""))

	// Stop: disabled, its running runs cancelled; no new runs.
	s := e.do("POST", "/automations/"+id+"/stop", e.keyA, nil)
	require.Equal(t, 200, s.status, string(s.raw))
	require.Equal(t, map[string]any{"object": "automation", "id": id, "status": "disabled"}, s.body)
	g = e.do("GET", "/automations/"+id, e.keyA, nil)
	require.Equal(t, "disabled", g.body["status"])
	require.Equal(t, map[string]any{"running": 0.0, "completed": 0.0, "failed": 0.0, "cancelled": 2.0}, g.body["runs"])
	cancelled := e.runsOf(e.keyA, id, "?status=cancelled")
	require.Len(t, cancelled, 2)
	require.Equal(t, "cancelled", cancelled[first]["status"])
	require.NotNil(t, cancelled[first]["completed_at"])
	require.Equal(t, "the automation was stopped", cancelled[first]["error"])
	require.Empty(t, e.runsOf(e.keyA, id, "?status=running"))
	require.Len(t, e.runsOf(e.keyA, id, "?status="+url.QueryEscape("running,cancelled")), 2)
	requireError(t, e.do("GET", "/automations/"+id+"/runs?status=bogus", e.keyA, nil), 422, "validation_error")
	_, runs = e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "contact_id": ada})
	require.Empty(t, runs, "a stopped automation starts no run")

	// Enabled again, it starts runs again (the contact's run ended).
	require.Equal(t, 200, e.do("PATCH", "/automations/"+id, e.keyA, map[string]any{"status": "enabled"}).status)
	_, runs = e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "contact_id": ada})
	require.Len(t, runs, 1)
	// A contact deleted ends its runs.
	require.Equal(t, 200, e.do("DELETE", "/contacts/"+ada, e.keyA, nil).status)
	gone := e.do("GET", "/automations/"+id+"/runs/"+runs[0], e.keyA, nil)
	require.Equal(t, 200, gone.status, string(gone.raw))
	require.Equal(t, "cancelled", gone.body["status"])
	require.Nil(t, gone.body["contact_id"])
	require.Equal(t, "the contact was deleted", gone.body["error"])

	// Delete: the automation and its runs are gone.
	d := e.do("DELETE", "/automations/"+id, e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	require.Equal(t, map[string]any{"object": "automation", "id": id, "deleted": true}, d.body)
	requireError(t, e.do("GET", "/automations/"+id, e.keyA, nil), 404, "not_found")
	requireError(t, e.do("GET", "/automations/"+id+"/runs", e.keyA, nil), 404, "not_found")
	requireError(t, e.do("GET", "/automations/"+id+"/runs/"+first, e.keyA, nil), 404, "not_found")
	requireError(t, e.do("DELETE", "/automations/"+id, e.keyA, nil), 404, "not_found")
	requireError(t, e.do("POST", "/automations/"+id+"/stop", e.keyA, nil), 404, "not_found")
	requireError(t, e.do("PATCH", "/automations/"+id, e.keyA, map[string]any{"name": "x"}), 404, "not_found")
	require.Equal(t, []string{copyID, off}, listIDs(t, e.do("GET", "/automations", e.keyA, nil)))
}

// TestAutomationDeleteCancelsRunning: deleting an automation with a
// running run removes the run with it; the contact may then enter a new
// automation on the same trigger.
func TestAutomationDeleteCancelsRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := map[string]any{"name": "Drip", "status": "enabled", "steps": []any{trigger("user.signed_up"),
		autoStep("wait", "delay", map[string]any{"duration": "30 days"})}, "connections": []any{autoConn("start", "wait", "")}}
	id := e.created("/automations", e.keyA, body)
	contact, runs := e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "email": "ada@example.com"})
	require.Len(t, runs, 1)
	require.Equal(t, 200, e.do("DELETE", "/automations/"+id, e.keyA, nil).status)
	requireError(t, e.do("GET", "/automations/"+id+"/runs/"+runs[0], e.keyA, nil), 404, "not_found")
	next := e.created("/automations", e.keyA, body)
	_, runs = e.sendEvent(e.keyA, map[string]any{"event": "user.signed_up", "contact_id": contact})
	require.Len(t, runs, 1)
	require.Len(t, e.runsOf(e.keyA, next, ""), 1)
}

// TestResendNodeSDKEvents runs testdata/resend-node/events.cjs, which
// drives resend.events.create, get (by id and by name), list, update,
// send (by email and by contact id) and remove with Resend's official
// Node SDK, unchanged.
func TestResendNodeSDKEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "events.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	type sdkError struct {
		Name       string
		Message    string
		StatusCode int `json:"statusCode"`
	}
	var res struct {
		Created struct{ Object, ID string }
		ByName  map[string]any `json:"byName"`
		ByID    map[string]any `json:"byId"`
		Bare    map[string]any
		List    struct {
			Object  string
			HasMore bool `json:"has_more"`
			Data    []map[string]any
		}
		Updated  struct{ Object, ID string }
		After    map[string]any `json:"afterUpdate"`
		Cleared  map[string]any
		Sent     map[string]any
		SentByID map[string]any `json:"sentById"`
		Contact  map[string]any
		BadPay   sdkError `json:"badPayload"`
		Reserved sdkError
		Both     sdkError
		Dup      sdkError `json:"duplicate"`
		Removed  struct {
			Object, ID string
			Deleted    bool
		}
		Gone sdkError
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Equal(t, "event", res.Created.Object)
	require.NoError(t, uuid.Validate(res.Created.ID))
	for _, got := range []map[string]any{res.ByName, res.ByID} {
		require.Equal(t, "event", got["object"])
		require.Equal(t, res.Created.ID, got["id"])
		require.Equal(t, "user.signed_up", got["name"])
		require.Equal(t, map[string]any{"plan": "string", "seats": "number", "trial": "boolean", "started": "date"},
			got["schema"])
		require.Nil(t, got["updated_at"])
	}
	require.Nil(t, res.Bare["schema"])
	require.Equal(t, "list", res.List.Object)
	require.False(t, res.List.HasMore)
	require.Len(t, res.List.Data, 2)
	require.Equal(t, "user.logged_in", res.List.Data[0]["name"], "newest first")
	require.Equal(t, res.Created.ID, res.Updated.ID)
	require.Equal(t, map[string]any{"plan": "string"}, res.After["schema"])
	require.NotNil(t, res.After["updated_at"])
	require.Nil(t, res.Cleared["schema"])
	require.Equal(t, "event", res.Sent["object"])
	require.Equal(t, "user.signed_up", res.Sent["event"])
	require.Equal(t, []any{}, res.Sent["runs"])
	require.Equal(t, res.Sent["contact_id"], res.Contact["id"], "the address became a contact")
	require.Equal(t, "new@example.com", res.Contact["email"])
	require.Equal(t, res.Sent["contact_id"], res.SentByID["contact_id"])
	for _, bad := range []sdkError{res.BadPay, res.Reserved, res.Both, res.Dup} {
		require.Equal(t, 422, bad.StatusCode, bad)
		require.Equal(t, "validation_error", bad.Name, bad)
	}
	require.Contains(t, res.BadPay.Message, "`payload.seats`")
	require.Contains(t, res.Reserved.Message, "resend:")
	require.Contains(t, res.Both.Message, "`contact_id` or `email`")
	require.Contains(t, res.Dup.Message, "already exists")
	require.Equal(t, "event", res.Removed.Object)
	require.Equal(t, res.Created.ID, res.Removed.ID)
	require.True(t, res.Removed.Deleted)
	require.Equal(t, 404, res.Gone.StatusCode)
	require.Equal(t, "not_found", res.Gone.Name)
}

// TestResendNodeSDKAutomations runs testdata/resend-node/automations.cjs,
// which drives resend.automations.create (every step type and connection
// type, in the SDK's camelCase), list, get, update, duplicate, stop,
// remove and runs.list and runs.get, with an event sent by
// resend.events.send starting a run, with Resend's official Node SDK,
// unchanged.
func TestResendNodeSDKAutomations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "automations.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	type ref struct{ Object, ID string }
	type list struct {
		Object  string
		HasMore bool `json:"has_more"`
		Data    []map[string]any
	}
	var res struct {
		Template string
		Segment  string
		Created  ref
		Got      struct {
			Object, ID, Name, Status string
			Runs                     map[string]int
			Steps                    []struct {
				Key, Type string
				Config    map[string]any
			}
			Connections []struct{ From, To, Type string }
		}
		List      list
		Enabled   list
		Sent      map[string]any
		Again     map[string]any
		Runs      list
		Run       map[string]any
		Updated   ref
		AfterUpd  map[string]any `json:"afterUpdate"`
		Dup       ref            `json:"duplicate"`
		Copy      map[string]any
		Stopped   struct{ Object, ID, Status string }
		Cancelled list
		BadStatus struct {
			Name       string
			StatusCode int `json:"statusCode"`
		} `json:"badStatus"`
		Invalid struct {
			Name, Message string
			StatusCode    int `json:"statusCode"`
		}
		Removed struct {
			Object, ID string
			Deleted    bool
		}
		Gone     struct{ Name string }
		RunsGone struct{ Name string } `json:"runsGone"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Equal(t, "automation", res.Created.Object)
	id := res.Created.ID
	require.NoError(t, uuid.Validate(id))

	// The SDK's camelCase arrived as the API's snake_case.
	require.Equal(t, "automation", res.Got.Object)
	require.Equal(t, "enabled", res.Got.Status)
	types := map[string]string{}
	configs := map[string]map[string]any{}
	for _, s := range res.Got.Steps {
		types[s.Key] = s.Type
		configs[s.Key] = s.Config
	}
	require.Equal(t, map[string]string{"start": "trigger", "wait": "delay", "welcome": "send_email",
		"await": "wait_for_event", "is_pro": "condition", "mark": "contact_update", "vip": "add_to_segment",
		"forget": "contact_delete"}, types)
	require.Equal(t, map[string]any{"event_name": "user.signed_up"}, configs["start"])
	require.Equal(t, map[string]any{"duration": "2 days"}, configs["wait"])
	require.Equal(t, map[string]any{"template": map[string]any{"id": res.Template,
		"variables": map[string]any{"NAME": map[string]any{"var": "event.name"}}}}, configs["welcome"])
	require.Equal(t, map[string]any{"event_name": "purchase.completed", "timeout": "7 days",
		"filter_rule": map[string]any{"type": "rule", "field": "event.amount", "operator": "gte", "value": 10.0}},
		configs["await"])
	require.Equal(t, "and", configs["is_pro"]["type"])
	require.Len(t, configs["is_pro"]["rules"], 2)
	require.Equal(t, map[string]any{"first_name": map[string]any{"var": "event.name"}}, configs["mark"])
	require.Equal(t, map[string]any{"segment_id": res.Segment}, configs["vip"])
	require.Equal(t, map[string]any{}, configs["forget"])
	connTypes := map[string]bool{}
	for _, c := range res.Got.Connections {
		require.NotEmpty(t, c.Type)
		connTypes[c.Type] = true
	}
	require.Equal(t, map[string]bool{"default": true, "event_received": true, "timeout": true, "condition_met": true,
		"condition_not_met": true}, connTypes)
	require.Len(t, res.Got.Connections, 9)

	require.Len(t, res.List.Data, 2)
	require.Equal(t, "list", res.List.Object)
	require.Len(t, res.Enabled.Data, 1)
	require.Equal(t, id, res.Enabled.Data[0]["id"])

	// The event started one run, and the same event again none.
	runs := res.Sent["runs"].([]any)
	require.Len(t, runs, 1)
	require.Equal(t, []any{}, res.Again["runs"])
	require.Len(t, res.Runs.Data, 1)
	require.Equal(t, runs[0], res.Runs.Data[0]["id"])
	require.Equal(t, "running", res.Runs.Data[0]["status"])
	require.Equal(t, res.Sent["contact_id"], res.Runs.Data[0]["contact_id"])
	require.Equal(t, "automation_run", res.Run["object"])
	require.Equal(t, runs[0], res.Run["id"])
	require.Equal(t, []any{}, res.Run["steps"])

	require.Equal(t, id, res.Updated.ID)
	require.Equal(t, "Onboarding v2", res.AfterUpd["name"])
	require.Len(t, res.AfterUpd["steps"], 2)
	require.Equal(t, "automation", res.Dup.Object)
	require.NotEqual(t, id, res.Dup.ID)
	require.Equal(t, "Onboarding v2 (copy)", res.Copy["name"])
	require.Equal(t, "disabled", res.Copy["status"])
	require.Equal(t, res.AfterUpd["steps"], res.Copy["steps"])
	require.Equal(t, "automation", res.Stopped.Object)
	require.Equal(t, "disabled", res.Stopped.Status)
	require.Len(t, res.Cancelled.Data, 1)
	require.Equal(t, "cancelled", res.Cancelled.Data[0]["status"])
	require.Equal(t, 1.0, res.Cancelled.Data[0]["version"], "the run kept its version")
	require.Equal(t, 422, res.BadStatus.StatusCode)
	require.Equal(t, 422, res.Invalid.StatusCode)
	require.Contains(t, res.Invalid.Message, `step "wait"`)
	require.Equal(t, "automation", res.Removed.Object)
	require.True(t, res.Removed.Deleted)
	require.Equal(t, "not_found", res.Gone.Name)
	require.Equal(t, "not_found", res.RunsGone.Name)
}
