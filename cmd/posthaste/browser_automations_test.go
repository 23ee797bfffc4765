package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// inStep is the selector of sel inside the editor's box of the step key
// (assets/automation-editor.js marks boxes with data-step).
func inStep(key, sel string) string {
	return `[data-step="` + key + `"] ` + sel
}

// pick chooses value in the select sel as a person does: the select takes
// the value and fires change. It fails when the select has no such option.
func pick(sel, value string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.WaitVisible(sel, chromedp.ByQuery),
		chromedp.ActionFunc(func(ctx context.Context) error {
			js := fmt.Sprintf(`(() => {
  const s = document.querySelector(%q);
  if (!s || ![...s.options].some(o => o.value === %q)) return false;
  s.value = %q;
  s.dispatchEvent(new Event("change", { bubbles: true }));
  return true;
})()`, sel, value, value)
			var ok bool
			if err := chromedp.Evaluate(js, &ok).Do(ctx); err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s has no option %q", sel, value)
			}
			return nil
		}),
	}
}

// addStep adds a step of typ with the editor's menu and waits for its box.
func addStep(typ, key string) chromedp.Action {
	return chromedp.Tasks{
		pick(`#au-add-type`, typ),
		chromedp.Click(`#au-add`, chromedp.ByID),
		chromedp.WaitVisible(`[data-step="`+key+`"]`, chromedp.ByQuery),
	}
}

// typeIn types text into the field of a step.
func typeIn(key, sel, text string) chromedp.Action {
	return chromedp.SendKeys(inStep(key, sel), text, chromedp.ByQuery)
}

// connect chooses where a step's outcome leads ("" ends the run).
func connect(from, outcome, to string) chromedp.Action {
	return pick(inStep(from, `select[data-outcome="`+outcome+`"]`), to)
}

// TestAutomationEditor builds an automation in Chromium from scratch the
// way a marketer does, with the editor's controls only: steps of every
// type added from the menu, their fields filled, one moved and one
// deleted, their outcomes connected with the selects. Saved without its
// template first, it comes back refused with the step named and the draft
// kept; saved with it, it is enabled from the list. The API then returns
// the steps and connections built, enabled, and an event sent for a
// sandbox contact runs through it: the run's page shows every step taken.
func TestAutomationEditor(t *testing.T) {
	dev := shared(t, "browser")
	creds := dev.newTeam(t, "posthaste.local")
	api := apiClient{t: t, base: dev.base, key: creds.APIKey}
	status, tpl := api.do("POST", "/templates", map[string]any{"name": "Welcome aboard",
		"from": "Acme <onboarding@posthaste.test>", "subject": "Welcome, {{{FIRST_NAME|there}}}",
		"html": "<p>{{{GREETING}}}! Your plan: {{{PLAN}}}</p>",
		"variables": []map[string]any{{"key": "GREETING", "type": "string", "fallback_value": "Hi"},
			{"key": "PLAN", "type": "string", "fallback_value": "free"}}})
	require.Equal(t, 201, status, tpl)
	templateID := tpl["id"].(string)
	status, out := api.do("POST", "/templates/"+templateID+"/publish", nil)
	require.Equal(t, 200, status, out)
	status, seg := api.do("POST", "/segments", map[string]any{"name": "Pro users"})
	require.Equal(t, 201, status, seg)
	segmentID := seg["id"].(string)

	ctx := newBrowserFor(t, 5*time.Minute)
	problems := &tourProblems{}
	require.NoError(t, chromedp.Run(ctx))
	problems.listen(ctx)
	step(t, ctx, problems, "automation-new",
		chromedp.Navigate(dev.base+"/dashboard/automations"),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, creds.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, creds.Password+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#new-automation`, chromedp.ByID),
		chromedp.Click(`#new-automation`, chromedp.ByID),
		chromedp.WaitVisible(`[data-step="trigger"]`, chromedp.ByQuery),
		// The visual editor stands in for the JSON field.
		chromedp.WaitNotVisible(`#au-definition`, chromedp.ByID),
		chromedp.Clear(`#au-name`, chromedp.ByID),
		chromedp.SendKeys(`#au-name`, "Onboarding", chromedp.ByID),
		typeIn("trigger", `[data-field="event"]`, "user.signed_up"),
	)

	// Trigger → delay → email with two variables → a condition of two
	// rules, joined by "any".
	step(t, ctx, problems, "automation-steps",
		addStep("delay", "delay_1"),
		typeIn("delay_1", `[data-field="duration"]`, "1 second"),
		addStep("send_email", "send_email_1"),
		typeIn("send_email_1", `[data-field="subject"]`, "Welcome!"),
		chromedp.Click(`#au-send_email_1-variable-add`, chromedp.ByID),
		typeIn("send_email_1", `#au-send_email_1-variable-1-key`, "PLAN"),
		pick(`#au-send_email_1-variable-1-mode`, "ref"),
		typeIn("send_email_1", `#au-send_email_1-variable-1-value`, "event.plan"),
		chromedp.Click(`#au-send_email_1-variable-add`, chromedp.ByID),
		typeIn("send_email_1", `#au-send_email_1-variable-2-key`, "GREETING"),
		typeIn("send_email_1", `#au-send_email_1-variable-2-value`, "Hello"),
		addStep("condition", "condition_1"),
		typeIn("condition_1", `#au-condition_1-condition-1-field`, "event.plan"),
		typeIn("condition_1", `#au-condition_1-condition-1-value`, "pro"),
		chromedp.Click(`#au-condition_1-condition-add`, chromedp.ByID),
		typeIn("condition_1", `#au-condition_1-condition-2-field`, "event.seats"),
		pick(`#au-condition_1-condition-2-op`, "gte"),
		typeIn("condition_1", `#au-condition_1-condition-2-value`, "5"),
		pick(`#au-condition_1-condition-join`, "or"),
	)
	// Met: into a segment. Not met: wait for the upgrade, then update the
	// contact; on timeout, delete it. A step added by mistake is deleted,
	// one is moved up.
	step(t, ctx, problems, "automation-branches",
		addStep("add_to_segment", "add_to_segment_1"),
		pick(inStep("add_to_segment_1", `[data-field="segment"]`), segmentID),
		addStep("wait_for_event", "wait_for_event_1"),
		typeIn("wait_for_event_1", `[data-field="event"]`, "user.upgraded"),
		typeIn("wait_for_event_1", `[data-field="timeout"]`, "3 days"),
		chromedp.Click(`#au-wait_for_event_1-filter-add`, chromedp.ByID),
		typeIn("wait_for_event_1", `#au-wait_for_event_1-filter-1-field`, "event.plan"),
		typeIn("wait_for_event_1", `#au-wait_for_event_1-filter-1-value`, "pro"),
		addStep("contact_update", "contact_update_1"),
		pick(`#au-contact_update_1-first-mode`, "ref"),
		typeIn("contact_update_1", `#au-contact_update_1-first`, "event.first_name"),
		chromedp.Click(`#au-contact_update_1-property-add`, chromedp.ByID),
		typeIn("contact_update_1", `#au-contact_update_1-property-1-key`, "plan"),
		pick(`#au-contact_update_1-property-1-mode`, "ref"),
		typeIn("contact_update_1", `#au-contact_update_1-property-1-value`, "event.plan"),
		addStep("contact_delete", "contact_delete_1"),
		addStep("delay", "delay_2"),
		chromedp.Click(`#au-delay_2-delete`, chromedp.ByID),
		chromedp.WaitNotPresent(`[data-step="delay_2"]`, chromedp.ByQuery),
		chromedp.Click(`#au-contact_delete_1-up`, chromedp.ByID),
	)
	step(t, ctx, problems, "automation-connect",
		connect("trigger", "default", "delay_1"),
		connect("delay_1", "default", "send_email_1"),
		connect("send_email_1", "default", "condition_1"),
		connect("condition_1", "condition_met", "add_to_segment_1"),
		connect("condition_1", "condition_not_met", "wait_for_event_1"),
		connect("add_to_segment_1", "default", ""),
		connect("wait_for_event_1", "event_received", "contact_update_1"),
		connect("wait_for_event_1", "timeout", "contact_delete_1"),
		connect("contact_update_1", "default", ""),
	)
	wantOrder := []string{"trigger", "delay_1", "send_email_1", "condition_1", "add_to_segment_1", "wait_for_event_1",
		"contact_delete_1", "contact_update_1"}
	order := func() []string {
		var keys []string
		require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(
			`[...document.querySelectorAll("#au-steps > .au-step")].map(e => e.dataset.step)`, &keys)))
		return keys
	}
	require.Equal(t, wantOrder, order())
	// Every connection is drawn.
	var lines int
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll("svg.au-lines path.au-line").length`, &lines)))
	require.Equal(t, 7, lines)
	var from string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(inStep("contact_delete_1", `.au-from`), &from, chromedp.ByQuery)))
	require.Equal(t, "Comes from step 6 (timeout).", from)
	var unsaved string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`#au-save-status`, &unsaved, chromedp.ByID)))
	require.Equal(t, "Unsaved changes", unsaved)
	screenshot(t, ctx, "automation-editor")

	// Saved without its email's template: refused, the step named and
	// marked, the draft as it was.
	var refusal, subject, ruleValue, name string
	step(t, ctx, problems, "automation-refused",
		chromedp.Click(`#au-save`, chromedp.ByID),
		chromedp.WaitVisible(`#automation-error`, chromedp.ByID),
		chromedp.WaitVisible(`[data-step="send_email_1"].au-invalid`, chromedp.ByQuery),
		chromedp.Text(`#automation-error`, &refusal, chromedp.ByID),
		chromedp.Value(inStep("send_email_1", `[data-field="subject"]`), &subject, chromedp.ByQuery),
		chromedp.Value(`#au-condition_1-condition-2-value`, &ruleValue, chromedp.ByID),
		chromedp.Value(`#au-name`, &name, chromedp.ByID),
	)
	require.Contains(t, refusal, `step "send_email_1"`)
	require.Contains(t, refusal, "template")
	require.Equal(t, "Welcome!", subject)
	require.Equal(t, "5", ruleValue)
	require.Equal(t, "Onboarding", name)
	require.Equal(t, wantOrder, order())
	for _, p := range problems.take() {
		if !strings.Contains(p, "422") {
			t.Errorf("browser: %s", p)
		}
	}
	screenshot(t, ctx, "automation-refused")

	// With the template, saved; then enabled from the list.
	var url, notice string
	step(t, ctx, problems, "automation-saved",
		pick(inStep("send_email_1", `[data-field="template"]`), templateID),
		chromedp.Click(`#au-save`, chromedp.ByID),
		chromedp.WaitVisible(`#automation-notice`, chromedp.ByID),
		chromedp.WaitVisible(`[data-step="contact_update_1"]`, chromedp.ByQuery),
		chromedp.Location(&url),
		chromedp.Text(`#automation-notice`, &notice, chromedp.ByID),
	)
	require.Contains(t, url, "?done=created")
	require.Contains(t, notice, "Automation saved.")
	require.Equal(t, wantOrder, order(), "the saved graph, as the server shows it")
	id := dashboardID(url)
	row := `tr[data-automation="` + id + `"]`
	var badge, trigger string
	step(t, ctx, problems, "automation-enable",
		chromedp.Navigate(dev.base+"/dashboard/automations"),
		chromedp.Click(row+` button.au-enable`, chromedp.ByQuery),
		chromedp.WaitVisible(row+` button.au-stop`, chromedp.ByQuery),
		chromedp.Text(row+` .badge`, &badge, chromedp.ByQuery),
		chromedp.Text(row+` td[data-label="Trigger"]`, &trigger, chromedp.ByQuery),
	)
	require.Equal(t, "enabled", badge)
	require.Equal(t, "user.signed_up", strings.TrimSpace(trigger))
	screenshot(t, ctx, "automations")

	// The API has the graph built, enabled.
	status, got := api.do("GET", "/automations/"+id, nil)
	require.Equal(t, 200, status, got)
	require.Equal(t, "enabled", got["status"])
	require.Equal(t, "Onboarding", got["name"])
	wantSteps := []struct{ key, typ, config string }{
		{"trigger", "trigger", `{"event_name":"user.signed_up"}`},
		{"delay_1", "delay", `{"duration":"1 second"}`},
		{"send_email_1", "send_email", `{"template":{"id":"` + templateID + `","variables":{"PLAN":{"var":"event.plan"},
			"GREETING":"Hello"}},"subject":"Welcome!"}`},
		{"condition_1", "condition", `{"type":"or","rules":[{"type":"rule","field":"event.plan","operator":"eq","value":"pro"},
			{"type":"rule","field":"event.seats","operator":"gte","value":5}]}`},
		{"add_to_segment_1", "add_to_segment", `{"segment_id":"` + segmentID + `"}`},
		{"wait_for_event_1", "wait_for_event", `{"event_name":"user.upgraded","timeout":"3 days",
			"filter_rule":{"type":"rule","field":"event.plan","operator":"eq","value":"pro"}}`},
		{"contact_delete_1", "contact_delete", `{}`},
		{"contact_update_1", "contact_update", `{"first_name":{"var":"event.first_name"},"properties":{"plan":{"var":"event.plan"}}}`},
	}
	steps := got["steps"].([]any)
	require.Len(t, steps, len(wantSteps))
	for i, w := range wantSteps {
		s := steps[i].(map[string]any)
		require.Equal(t, w.key, s["key"])
		require.Equal(t, w.typ, s["type"])
		cfg, err := json.Marshal(s["config"])
		require.NoError(t, err)
		require.JSONEq(t, w.config, string(cfg), w.key)
	}
	type conn struct{ From, To, Type string }
	var conns []conn
	for _, c := range got["connections"].([]any) {
		m := c.(map[string]any)
		conns = append(conns, conn{m["from"].(string), m["to"].(string), m["type"].(string)})
	}
	require.ElementsMatch(t, []conn{
		{"trigger", "delay_1", "default"},
		{"delay_1", "send_email_1", "default"},
		{"send_email_1", "condition_1", "default"},
		{"condition_1", "add_to_segment_1", "condition_met"},
		{"condition_1", "wait_for_event_1", "condition_not_met"},
		{"wait_for_event_1", "contact_update_1", "event_received"},
		{"wait_for_event_1", "contact_delete_1", "timeout"},
	}, conns)

	// An event for a sandbox contact runs through it: delay, email,
	// condition met, into the segment.
	status, sent := api.do("POST", "/events/send", map[string]any{"event": "user.signed_up",
		"email": "delivered@posthaste.test", "payload": map[string]any{"plan": "pro", "seats": 1, "first_name": "Ada"}})
	require.Equal(t, 202, status, sent)
	runs := sent["runs"].([]any)
	require.Len(t, runs, 1)
	runID := runs[0].(string)
	var run map[string]any
	eventually(t, 2*time.Minute, func() error {
		status, run = api.do("GET", "/automations/"+id+"/runs/"+runID, nil)
		if status != 200 || run["status"] != "completed" {
			return fmt.Errorf("the run never completed: %d %v", status, run)
		}
		return nil
	})
	var taken []string
	var runStatus, workflow string
	step(t, ctx, problems, "automation-run",
		chromedp.Navigate(dev.base+"/dashboard/automations/"+id+"/runs"),
		chromedp.Click(`tr[data-run="`+runID+`"] a`, chromedp.ByQuery),
		chromedp.WaitVisible(`#run-steps`, chromedp.ByID),
		chromedp.Text(`#run-status`, &runStatus, chromedp.ByID),
		chromedp.Evaluate(`[...document.querySelectorAll("#run-steps > li")].map(e => e.dataset.step + ":" + e.dataset.status)`, &taken),
		chromedp.AttributeValue(`#run-workflow`, "href", &workflow, nil, chromedp.ByID),
	)
	require.Equal(t, "completed", runStatus)
	require.Equal(t, []string{"trigger:completed", "delay_1:completed", "send_email_1:completed", "condition_1:completed",
		"add_to_segment_1:completed"}, taken)
	require.Contains(t, workflow, "automation-run%2F"+runID)
	screenshot(t, ctx, "automation-run")
	for _, p := range problems.take() {
		t.Errorf("browser: %s", p)
	}
}
