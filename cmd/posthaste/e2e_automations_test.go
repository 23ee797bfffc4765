package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/workflows"
)

// automationRun is a run as GET /automations/{id}/runs/{run_id} has it.
type automationRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Steps  []struct {
		Key    string          `json:"key"`
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	} `json:"steps"`
}

// stepStatuses maps a run's step keys to their statuses.
func (r automationRun) stepStatuses() map[string]string {
	out := map[string]string{}
	for _, s := range r.Steps {
		out[s.Key] = s.Status
	}
	return out
}

// runsOf reads an automation's runs with their steps through the API.
func runsOf(c apiClient, automationID string) []automationRun {
	c.t.Helper()
	status, body := c.do("GET", "/automations/"+automationID+"/runs?limit=100", nil)
	require.Equal(c.t, 200, status, body)
	var runs []automationRun
	for _, item := range body["data"].([]any) {
		id := item.(map[string]any)["id"].(string)
		res, raw := c.raw("GET", "/automations/"+automationID+"/runs/"+id, nil)
		require.Equal(c.t, 200, res.StatusCode, string(raw))
		var r automationRun
		require.NoError(c.t, json.Unmarshal(raw, &r), string(raw))
		runs = append(runs, r)
	}
	return runs
}

// waitRuns waits until the automation has n runs that all meet cond.
func waitRuns(c apiClient, automationID string, n int, timeout time.Duration, cond func(automationRun) error) []automationRun {
	c.t.Helper()
	var runs []automationRun
	eventually(c.t, timeout, func() error {
		runs = runsOf(c, automationID)
		if len(runs) != n {
			return fmt.Errorf("%d runs, want %d", len(runs), n)
		}
		for _, r := range runs {
			if err := cond(r); err != nil {
				return fmt.Errorf("run %s: %w (%+v)", r.ID, err, r)
			}
		}
		return nil
	})
	return runs
}

// TestDevAutomationJourney runs an automation end to end through `posthaste
// dev`, driven by Resend's Node SDK (api/testdata/resend-node/journey.cjs):
// an event sent for an address that is no contact yet creates the contact
// and starts a run, which waits on a durable timer, sends a template with
// the event's values through the normal send path (delivered to the
// contact's MX), waits for a second event (one that fails its filter rule
// does not count), branches on the waited event's payload and adds the
// contact to a segment. A second event while the run is running starts no
// second run; once it ended, the next one does, and stopping the
// automation cancels that run where it waits.
func TestDevAutomationJourney(t *testing.T) {
	dev := shared(t, "member")
	owner := dev.newTeam(t, "member.test")
	c := apiClient{t: t, base: dev.base, key: owner.APIKey}

	status, body := c.do("POST", "/templates", map[string]any{
		"name": "Cart", "alias": "cart", "from": "Shop <onboarding@posthaste.test>",
		"subject": "Still want the {{{ITEM}}}?", "html": "<p>{{{ITEM}}} for {{{TOTAL}}}</p>",
		"variables": []map[string]any{{"key": "ITEM", "type": "string"}, {"key": "TOTAL", "type": "number"}},
	})
	require.Equal(t, 201, status, body)
	status, body = c.do("POST", "/templates/cart/publish", nil)
	require.Equal(t, 200, status, body)
	status, body = c.do("POST", "/segments", map[string]any{"name": "VIP"})
	require.Equal(t, 201, status, body)
	segment := body["id"].(string)

	node := func(step string, env ...string) []byte {
		return runResendNode(t, "journey.cjs", append([]string{"RESEND_BASE_URL=" + dev.base,
			"RESEND_API_KEY=" + owner.APIKey, "STEP=" + step, "EMAIL=" + owner.Email}, env...)...)
	}
	var setup struct{ Automation, Event string }
	out := node("setup", "DELAY=1 second", "TIMEOUT=1 hour", "TEMPLATE=cart", "SEGMENT="+segment)
	require.NoError(t, json.Unmarshal(out, &setup), string(out))

	// The reminder reaches the contact's MX, rendered with the event's values.
	msgs := dev.messagesTo(t, owner.Email, 1, 60*time.Second)
	require.Contains(t, string(msgs[0].Data), "Still want the Teapot?")
	require.Contains(t, string(msgs[0].Data), "Teapot for 42")
	runs := waitRuns(c, setup.Automation, 1, 30*time.Second, func(r automationRun) error {
		if r.stepStatuses()["paid"] != "waiting" {
			return fmt.Errorf("not waiting for order.paid yet")
		}
		return nil
	})
	require.Equal(t, "running", runs[0].Status)
	// The same event again while the run runs starts no second run.
	status, body = c.do("POST", "/events/send", map[string]any{"event": "cart.abandoned", "email": owner.Email,
		"payload": map[string]any{"item": "Kettle", "total": 1}})
	require.Equal(t, 202, status, body)
	require.Empty(t, body["runs"])

	node("pay", "PAID_TOTAL=150")
	runs = waitRuns(c, setup.Automation, 1, 30*time.Second, func(r automationRun) error {
		if r.Status != "completed" {
			return fmt.Errorf("status %s", r.Status)
		}
		return nil
	})
	require.Equal(t, map[string]string{"start": "completed", "wait": "completed", "remind": "completed",
		"paid": "completed", "big": "completed", "vip": "completed"}, runs[0].stepStatuses())
	status, body = c.do("GET", "/contacts/"+owner.Email+"/segments", nil)
	require.Equal(t, 200, status, body)
	require.Len(t, body["data"], 1, "the condition met: the contact is in the VIP segment")
	temporal := "127.0.0.1:" + dev.env["POSTHASTE_TEMPORAL_PORT"]
	saveWorkflowHistory(t, temporal, workflows.AutomationRunWorkflowID(runs[0].ID), "automationrun_journey.json", 500)

	// The run ended: the next event starts a second run, which a stop
	// cancels where it waits for order.paid.
	status, body = c.do("POST", "/events/send", map[string]any{"event": "cart.abandoned", "email": owner.Email,
		"payload": map[string]any{"item": "Mug", "total": 7}})
	require.Equal(t, 202, status, body)
	require.Len(t, body["runs"], 1)
	second := body["runs"].([]any)[0].(string)
	dev.messagesTo(t, owner.Email, 2, 60*time.Second)
	eventually(t, 30*time.Second, func() error {
		for _, r := range runsOf(c, setup.Automation) {
			if r.ID == second && r.stepStatuses()["paid"] == "waiting" {
				return nil
			}
		}
		return fmt.Errorf("the second run does not wait for order.paid yet")
	})
	status, body = c.do("POST", "/automations/"+setup.Automation+"/stop", nil)
	require.Equal(t, 200, status, body)
	require.Equal(t, "disabled", body["status"])
	status, body = c.do("GET", "/automations/"+setup.Automation+"/runs?status=cancelled", nil)
	require.Equal(t, 200, status, body)
	require.Len(t, body["data"], 1)
	require.Equal(t, second, body["data"].([]any)[0].(map[string]any)["id"])
	tc, err := client.Dial(client.Options{HostPort: temporal})
	require.NoError(t, err)
	defer tc.Close()
	eventually(t, time.Minute, func() error {
		d, err := tc.DescribeWorkflowExecution(context.Background(), workflows.AutomationRunWorkflowID(second), "")
		require.NoError(t, err)
		if d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return fmt.Errorf("the cancelled run's workflow did not end: %v", d.WorkflowExecutionInfo.Status)
		}
		return nil
	})
	saveWorkflowHistory(t, temporal, workflows.AutomationRunWorkflowID(second), "automationrun_cancelled.json", 500)
	// Its steps stayed where the stop found it.
	for _, r := range runsOf(c, setup.Automation) {
		if r.ID == second {
			require.Equal(t, "cancelled", r.Status)
			require.Equal(t, "waiting", r.stepStatuses()["paid"])
		}
	}

	// A wait that times out, a contact update from the event and the
	// contact's deletion, which ends the run completed.
	status, body = c.do("POST", "/automations", map[string]any{"name": "Close", "status": "enabled",
		"steps": []map[string]any{
			{"key": "start", "type": "trigger", "config": map[string]any{"event_name": "account.closed"}},
			{"key": "name", "type": "contact_update", "config": map[string]any{
				"first_name": map[string]any{"var": "event.name"}, "properties": map[string]any{}}},
			{"key": "grace", "type": "wait_for_event", "config": map[string]any{"event_name": "account.reopened",
				"timeout": "2 seconds"}},
			{"key": "forget", "type": "contact_delete", "config": map[string]any{}},
		},
		"connections": []map[string]any{{"from": "start", "to": "name"}, {"from": "name", "to": "grace"},
			{"from": "grace", "to": "forget", "type": "timeout"}},
	})
	require.Equal(t, 201, status, body)
	closing := body["id"].(string)
	status, body = c.do("POST", "/events/send", map[string]any{"event": "account.closed", "email": "leaving@member.test",
		"payload": map[string]any{"name": "Lea"}})
	require.Equal(t, 202, status, body)
	runs = waitRuns(c, closing, 1, time.Minute, func(r automationRun) error {
		if r.Status != "completed" {
			return fmt.Errorf("status %s", r.Status)
		}
		return nil
	})
	require.Equal(t, map[string]string{"start": "completed", "name": "completed", "grace": "completed",
		"forget": "completed"}, runs[0].stepStatuses())
	status, body = c.do("GET", "/contacts/leaving@member.test", nil)
	require.Equal(t, 404, status, body)
	saveWorkflowHistory(t, temporal, workflows.AutomationRunWorkflowID(runs[0].ID), "automationrun_timeout_delete.json", 500)
}

// TestDevAutomationCrash kills `posthaste dev` (SIGKILL) while runs wait
// on their delay, and starts it again: every run still completes, once,
// and every contact got exactly one email, delivered.
func TestDevAutomationCrash(t *testing.T) {
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	env := devEnv(t, pgtest.NewDatabase(t), dns, mx)
	smtpListen(t, env)
	env["POSTHASTE_STEP_RETRY_MAX"] = "1s"
	dev := startProcess(t, env, "dev", "Posthaste is ready")
	key := readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey
	base := "http://" + env["POSTHASTE_HTTP_ADDR"]
	c := apiClient{t: t, base: base, key: key}

	status, body := c.do("POST", "/templates", map[string]any{"name": "Hi", "alias": "hi",
		"from": "onboarding@posthaste.test", "subject": "Hi {{{N}}}", "html": "<p>Hi {{{N}}}</p>", "text": "Hi {{{N}}}",
		"variables": []map[string]any{{"key": "N", "type": "string"}}})
	require.Equal(t, 201, status, body)
	status, body = c.do("POST", "/templates/hi/publish", nil)
	require.Equal(t, 200, status, body)
	status, body = c.do("POST", "/automations", map[string]any{"name": "Later", "status": "enabled",
		"steps": []map[string]any{
			{"key": "start", "type": "trigger", "config": map[string]any{"event_name": "signed.up"}},
			{"key": "wait", "type": "delay", "config": map[string]any{"duration": "4 seconds"}},
			{"key": "hello", "type": "send_email", "config": map[string]any{
				"template": map[string]any{"id": "hi", "variables": map[string]any{"N": map[string]any{"var": "event.n"}}}}},
		},
		"connections": []map[string]any{{"from": "start", "to": "wait"}, {"from": "wait", "to": "hello"}},
	})
	require.Equal(t, 201, status, body)
	automation := body["id"].(string)

	const n = 12
	for i := range n {
		status, body := c.do("POST", "/events/send", map[string]any{"event": "signed.up",
			"email": fmt.Sprintf("delivered+%d@posthaste.test", i), "payload": map[string]any{"n": fmt.Sprint(i)}})
		require.Equal(t, 202, status, body)
		require.Len(t, body["runs"], 1)
	}
	waitRuns(c, automation, n, 30*time.Second, func(r automationRun) error {
		if r.stepStatuses()["wait"] != "waiting" {
			return fmt.Errorf("not waiting on its delay")
		}
		return nil
	})
	require.NoError(t, dev.cmd.Process.Kill())
	require.Error(t, <-dev.done, "dev died by SIGKILL")
	dev.ended = true
	startProcess(t, env, "dev", "Posthaste is ready")

	runs := waitRuns(c, automation, n, 90*time.Second, func(r automationRun) error {
		if r.Status != "completed" {
			return fmt.Errorf("status %s", r.Status)
		}
		return nil
	})
	seen := map[string]bool{}
	for _, r := range runs {
		require.Len(t, r.Steps, 3, "each step once: %+v", r)
		var out struct {
			EmailID string `json:"email_id"`
		}
		for _, s := range r.Steps {
			if s.Key == "hello" {
				require.NoError(t, json.Unmarshal(s.Output, &out))
			}
		}
		require.NotEmpty(t, out.EmailID)
		require.False(t, seen[out.EmailID])
		seen[out.EmailID] = true
		c.waitLastEvent(out.EmailID, "delivered")
	}
	// Exactly one email per contact: the team sent n emails in all.
	status, body = c.do("GET", "/emails?limit=100", nil)
	require.Equal(t, 200, status, body)
	to := map[string]int{}
	for _, e := range body["data"].([]any) {
		for _, addr := range e.(map[string]any)["to"].([]any) {
			to[addr.(string)]++
		}
	}
	require.Len(t, to, n)
	for addr, k := range to {
		require.Equal(t, 1, k, addr)
		require.True(t, strings.HasPrefix(addr, "delivered+"))
	}
}
