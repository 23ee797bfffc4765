package api_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/usage"
)

// newHealthEnv is an API whose send path checks account health, as
// production wires it (submit.Config.Health).
func newHealthEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	logs := reqlog.New(reqlog.Config{Interval: 100 * time.Millisecond, Dropped: metrics.RequestLogDropped}, st.Insights)
	t.Cleanup(func() { _ = logs.Close(context.Background()) })
	n := &notifier{}
	sub := submit.New(submit.Config{Store: submit.StoreOf(st), Notifier: n, Health: st.Insights})
	h, err := api.New(api.Config{
		Auth:             auth.NewAuthenticator(st.Accounts, time.Second),
		Submit:           sub,
		Emails:           submit.NewEmails(st.Emails),
		Usage:            usage.New(st.Insights, st.Accounts),
		Broadcasts:       broadcast.NewService(broadcast.Config{Store: st, Submit: sub, Waker: &broadcastWaker{}}),
		Audience:         audience.New(st.Audience),
		Metrics:          metrics,
		Gatherer:         reg,
		Limiter:          ratelimit.NewLocal(ratelimit.LocalConfig{}),
		DefaultRateLimit: 10_000,
		RequestLog:       logs,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(specCheck(t, h))
	t.Cleanup(srv.Close)
	a, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "A", "a@example.com")
	require.NoError(t, err)
	b, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "B", "b@example.com")
	require.NoError(t, err)
	return &env{t: t, srv: srv, store: st, notify: n, logs: logs, metrics: metrics, keyA: a.APIKey, keyB: b.APIKey,
		teamA: uuid.MustParse(a.TeamID), teamB: uuid.MustParse(b.TeamID)}
}

// bounceUntilPaused stores 100 of the team's recipients, 10 bounced, and
// evaluates health with POSTHASTE_HEALTH_PAUSE on: the team is paused.
func bounceUntilPaused(t *testing.T, st *store.Store, team uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	storetest.SeedOutcomes(t, st, team, map[string]int{"delivered": 90, "bounced": 10})
	notices, err := st.Insights.EvaluateHealth(ctx, time.Now(), health.DefaultWindow, true)
	require.NoError(t, err)
	require.Len(t, notices, 1)
	require.True(t, notices[0].Crossing.Paused)
}

// TestPausedTeamIsRefused: with POSTHASTE_HEALTH_PAUSE, a team whose
// bounce rate crossed 4 % gets 403 validation_error naming the rate and the
// threshold on POST /emails, POST /emails/batch and a broadcast's send,
// other teams send, and an operator's resume lets it send again (issue 19,
// point 5).
func TestPausedTeamIsRefused(t *testing.T) {
	t.Parallel()
	e := newHealthEnv(t)
	require.Equal(t, 200, e.do("POST", "/emails", e.keyA, sandboxSend).status)
	draft := e.newBroadcast(e.keyA, draftBody(e.newSegment(e.keyA, "All")))
	bounceUntilPaused(t, e.store, e.teamA)

	r := e.do("POST", "/emails", e.keyA, sandboxSend)
	requireError(t, r, 403, "validation_error")
	require.Equal(t, "Sending is paused for this team: its bounce rate over the last 30 days was 10.00 %, above the "+
		"4.00 % threshold. Clean the addresses that bounced from your lists, then ask the operator of this server to "+
		"resume sending.", r.body["message"])
	requireError(t, e.do("POST", "/emails/batch", e.keyA, []any{sandboxSend, sandboxSend}), 403, "validation_error")
	requireError(t, e.doH("POST", "/emails/batch", e.keyA, []any{sandboxSend}, map[string]string{
		"x-batch-validation": "permissive"}), 403, "validation_error")
	r = e.do("POST", "/broadcasts/"+draft+"/send", e.keyA, nil)
	requireError(t, r, 403, "validation_error")
	require.Contains(t, r.body["message"], "Sending is paused for this team")
	require.Equal(t, 200, e.do("POST", "/emails", e.keyB, sandboxSend).status, "another team sends")

	resumed, err := e.store.Insights.ResumeSending(context.Background(), e.teamA, time.Now())
	require.NoError(t, err)
	require.True(t, resumed)
	require.Equal(t, 200, e.do("POST", "/emails", e.keyA, sandboxSend).status)
	require.Equal(t, 200, e.do("POST", "/emails/batch", e.keyA, []any{sandboxSend}).status)
	require.Equal(t, 200, e.do("POST", "/broadcasts/"+draft+"/send", e.keyA, nil).status)
}
