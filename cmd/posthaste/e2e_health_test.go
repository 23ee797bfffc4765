package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/workflows"
)

// TestDevAccountHealthPause: in `posthaste dev` with
// POSTHASTE_HEALTH_PAUSE=true, a team whose sandbox sends bounce for 10 %
// of their recipients is paused by the health monitor: its owner gets one
// notice (through the system mailer, at the MX), POST /emails answers 403
// validation_error and SMTP 550 5.7.1 naming the rate and the threshold,
// and `admin health --resume` lets it send again (issue 19, point 5).
func TestDevAccountHealthPause(t *testing.T) {
	ctx := context.Background()
	dns, mx := memberMX(t)
	env := devEnv(t, pgtest.NewDatabase(t), dns, mx)
	env["POSTHASTE_HEALTH_PAUSE"] = "true"
	env["POSTHASTE_HEALTH_INTERVAL"] = "1s"
	dev := startDev(t, env)
	defer dev.stop(t)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	c := apiClient{t: t, base: dev.base, key: creds.APIKey}
	st, err := openStore(ctx, env["DATABASE_URL"], slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer st.Close()
	u, err := st.Accounts.UserByEmail(ctx, creds.Email)
	require.NoError(t, err)
	teams, err := st.Sessions.UserTeams(ctx, u.ID)
	require.NoError(t, err)
	require.Len(t, teams, 1)
	team := teams[0].ID

	for e := range 2 {
		want := map[string]string{}
		var to []string
		for i := range 50 {
			addr, status := fmt.Sprintf("delivered+%d-%d@posthaste.test", e, i), "delivered"
			if i < 5 {
				addr, status = fmt.Sprintf("bounced+%d-%d@posthaste.test", e, i), "bounced"
			}
			to, want[addr] = append(to, addr), status
		}
		id := c.send(map[string]any{"from": "onboarding@posthaste.test", "to": to, "subject": "list", "text": "hi"})
		c.waitFor(id, want)
	}

	eventually(t, 30*time.Second, func() error {
		p, err := st.Insights.SendingPause(ctx, team)
		require.NoError(t, err)
		if p == nil {
			return fmt.Errorf("the team was not paused:\n%s", dev.out.String())
		}
		return nil
	})
	const reason = "Sending is paused for this team: its bounce rate over the last 30 days was 10.00 %, above the 4.00 % threshold."
	// The pause reaches the process within a second (its pause cache).
	var status int
	var body map[string]any
	eventually(t, 30*time.Second, func() error {
		status, body = c.do("POST", "/emails", map[string]any{"from": "onboarding@posthaste.test",
			"to": "delivered@posthaste.test", "subject": "more", "text": "hi"})
		if status == 200 {
			return errors.New("sends were not refused after the pause")
		}
		return nil
	})
	require.Equal(t, 403, status, body)
	require.Equal(t, "validation_error", body["name"])
	require.True(t, strings.HasPrefix(body["message"].(string), reason), body["message"])

	_, implicit := smtpPorts(t, env)
	out, ids := swaks(t, "--server", implicit, "--tls-on-connect", "--auth", "PLAIN", "--auth-user", "posthaste",
		"--auth-password", creds.APIKey, "--from", "onboarding@posthaste.test", "--to", "delivered@posthaste.test",
		"--header", "Subject: paused smtp")
	require.Empty(t, ids, out)
	require.Contains(t, out, "550 5.7.1 "+reason)

	msgs := mx.WaitMessages(t, 1, 30*time.Second)
	require.Equal(t, []string{"owner@member.test"}, msgs[0].To)
	require.Contains(t, string(msgs[0].Data), "Subject: Sending paused: your bounce rate is above 4.00 %")
	require.Contains(t, string(msgs[0].Data), "bounce rate over the last 30 days is 10.00 % (10 of 100 emails")

	// Evaluations go on (each second) without a second notice.
	h, err := st.Insights.TeamHealth(ctx, team)
	require.NoError(t, err)
	pausedAt := h.State.Paused.At
	eventually(t, 30*time.Second, func() error {
		h, err = st.Insights.TeamHealth(ctx, team)
		require.NoError(t, err)
		if !h.EvaluatedAt.After(pausedAt.Add(2500 * time.Millisecond)) {
			return fmt.Errorf("no evaluation after the pause at %v: last at %v", pausedAt, h.EvaluatedAt)
		}
		return nil
	})
	list, _, err := st.Emails.ListEmails(ctx, team, store.Page{Limit: 100})
	require.NoError(t, err)
	notices := 0
	for _, e := range list {
		if strings.HasPrefix(e.Subject, "Sending paused") {
			notices++
		}
	}
	require.Equal(t, 1, notices, "one notice per crossing")
	saveHealthHistory(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"])

	var admin bytes.Buffer
	code := run(ctx, []string{"admin", "health", "--team", team.String(), "--resume"},
		func(k string) string { return env[k] }, &admin, &admin)
	require.Equal(t, 0, code, admin.String())
	var shown map[string]any
	require.NoError(t, json.Unmarshal(admin.Bytes(), &shown), admin.String())
	require.Equal(t, true, shown["resumed"])
	require.Equal(t, false, shown["paused"])
	// Lifted within a second as well.
	eventually(t, 30*time.Second, func() error {
		status, body = c.do("POST", "/emails", map[string]any{"from": "onboarding@posthaste.test",
			"to": "delivered@posthaste.test", "subject": "again", "text": "hi"})
		if status == 403 {
			return fmt.Errorf("sends still refused after the resume: %v", body)
		}
		return nil
	})
	require.Equal(t, 200, status, body)
}

// saveHealthHistory checks that the account health Schedule starts the
// AccountHealth workflow (the evaluations above are its runs) and records
// the history of one finished run (recordHistory).
func saveHealthHistory(t *testing.T, hostPort string) {
	t.Helper()
	ctx := t.Context()
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	d, err := tc.ScheduleClient().GetHandle(ctx, workflows.AccountHealthScheduleID).Describe(ctx)
	require.NoError(t, err)
	a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	require.True(t, ok)
	require.Equal(t, workflows.AccountHealthName, a.Workflow)
	require.Equal(t, workflows.TaskQueue, a.TaskQueue)
	for _, r := range d.Info.RecentActions {
		if r.StartWorkflowResult == nil {
			continue
		}
		id := r.StartWorkflowResult.WorkflowID
		w, err := tc.DescribeWorkflowExecution(ctx, id, r.StartWorkflowResult.FirstExecutionRunID)
		require.NoError(t, err)
		if w.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			recordHistory(t, tc, id, "accounthealth.json", 20)
			return
		}
	}
	t.Fatalf("no finished AccountHealth run among %d recent actions", len(d.Info.RecentActions))
}
