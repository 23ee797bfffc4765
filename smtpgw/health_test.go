package smtpgw_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/smtpgw"
)

// lateStore is the harness's store, known once the harness exists.
type lateStore struct {
	submit.Store
	submit.HealthGate
}

// TestPausedTeamIsRefusedOverSMTP: a team paused for its account health
// is refused at MAIL FROM, and at the end of DATA when the pause came
// during the transaction, with 550 5.7.1 and the reason (issue 19,
// point 5).
func TestPausedTeamIsRefusedOverSMTP(t *testing.T) {
	ctx := context.Background()
	late := &lateStore{}
	h := newHarness(t, options{submit: func(smtpgw.Submitter) smtpgw.Submitter {
		return submit.New(submit.Config{Store: late, Health: late})
	}})
	late.Store, late.HealthGate = submit.StoreOf(h.st), h.st.Insights

	d := h.login(h.implicit)
	d.cmd(250, "MAIL FROM:<bounces@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	storetest.SeedOutcomes(t, h.st, h.team, map[string]int{"delivered": 90, "bounced": 10})
	_, err := h.st.Insights.EvaluateHealth(ctx, time.Now(), health.DefaultWindow, true)
	require.NoError(t, err)

	msg := d.data(550, domainMsg)
	require.Equal(t, "5.7.1 Sending is paused for this team: its bounce rate over the last 30 days was 10.00 %, "+
		"above the 4.00 % threshold. Clean the addresses that bounced from your lists, then ask the operator of "+
		"this server to resume sending.", msg)
	msg = d.cmd(550, "MAIL FROM:<bounces@example.test>")
	require.Contains(t, msg, "5.7.1 Sending is paused for this team: its bounce rate")

	resumed, err := h.st.Insights.ResumeSending(ctx, h.team, time.Now())
	require.NoError(t, err)
	require.True(t, resumed)
	d.cmd(250, "MAIL FROM:<bounces@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	emailID(t, d.data(250, domainMsg))
}
