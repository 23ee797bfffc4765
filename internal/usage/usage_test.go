package usage_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/usage"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func newTeam(t *testing.T, st *store.Store) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(context.Background(), store.Team{ID: id, Name: "t"}))
	return id
}

// send accepts one email of the team to the recipients and records, at
// now, its sending and each recipient's outcome (delivered or bounced).
func send(t *testing.T, st *store.Store, team uuid.UUID, outcomes map[string]string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	text := "hi"
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
		FromDomain: "posthaste.test", Subject: "hi", Text: &text, LastEvent: store.EventQueued, CreatedAt: now}
	var events []store.Event
	for addr, outcome := range outcomes {
		e.To = append(e.To, addr)
		e.Recipients = append(e.Recipients, store.Recipient{Address: addr, Kind: "to", Domain: "dest.test",
			Status: store.EventQueued})
		ev := store.Event{Type: outcome, Recipient: addr, CreatedAt: now}
		if outcome == store.EventBounced {
			ev.Detail = map[string]any{"type": "Permanent", "subType": "General", "message": "no"}
		}
		events = append(events, store.Event{Type: store.EventSent, Recipient: addr, CreatedAt: now}, ev)
	}
	_, err := st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{e}})
	require.NoError(t, err)
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, events))
}

// TestUsageIsTheTeamsOwn: each read returns the team's own usage, and
// nothing of another team's: a request log entry of team B is not found
// by team A, and the metrics, quota and health of each count only its own
// mail.
func TestUsageIsTheTeamsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	svc := usage.New(st.Insights, st.Accounts)
	a, b := newTeam(t, st), newTeam(t, st)
	now := time.Now().UTC()

	// The request log.
	require.NoError(t, st.Insights.EnsureRequestLogPartitions(ctx, now, 1))
	body := `{"to":"x@dest.test"}`
	logA1 := store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &a, Method: "POST", Path: "/emails", Status: 200,
		ClientAddr: "192.0.2.1", RequestBody: &body, CreatedAt: now}
	logA2 := store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &a, Method: "GET", Path: "/domains", Status: 401,
		ClientAddr: "192.0.2.1", CreatedAt: now.Add(time.Millisecond)}
	logB := store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &b, Method: "POST", Path: "/emails", Status: 200,
		ClientAddr: "192.0.2.2", RequestBody: &body, CreatedAt: now}
	anonymous := store.RequestLog{ID: uuid.Must(uuid.NewV7()), Method: "GET", Path: "/emails", Status: 401,
		ClientAddr: "192.0.2.3", CreatedAt: now}
	require.NoError(t, st.Insights.InsertRequestLogs(ctx, []store.RequestLog{logA1, logA2, logB, anonymous}))

	logs, more, err := svc.RequestLogs(ctx, a, store.LogFilter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, logs, 2)
	require.Equal(t, []uuid.UUID{logA2.ID, logA1.ID}, []uuid.UUID{logs[0].ID, logs[1].ID}, "newest first")
	require.Nil(t, logs[1].RequestBody, "lists leave the bodies out")
	logs, _, err = svc.RequestLogs(ctx, a, store.LogFilter{Path: "/emails"}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, logs, 1)
	require.Equal(t, logA1.ID, logs[0].ID)
	logs, _, err = svc.RequestLogs(ctx, b, store.LogFilter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, logs, 1)
	require.Equal(t, logB.ID, logs[0].ID)

	got, err := svc.RequestLog(ctx, a, logA1.ID)
	require.NoError(t, err)
	require.NotNil(t, got.RequestBody)
	require.Equal(t, body, *got.RequestBody)
	_, err = svc.RequestLog(ctx, a, logB.ID)
	require.True(t, errors.Is(err, store.ErrNotFound), "team A reads no request of team B: %v", err)
	_, err = svc.RequestLog(ctx, b, logA1.ID)
	require.True(t, errors.Is(err, store.ErrNotFound), "nor B one of A's: %v", err)

	// Metrics and the quota used.
	send(t, st, a, map[string]string{"r1@dest.test": store.EventDelivered, "r2@dest.test": store.EventDelivered,
		"r3@dest.test": store.EventBounced}, now)
	send(t, st, b, map[string]string{"r4@dest.test": store.EventDelivered}, now)
	q := store.MetricsQuery{Start: now.Add(-time.Hour), End: now.Add(time.Hour)}
	m, err := svc.EmailMetrics(ctx, a, q)
	require.NoError(t, err)
	require.Equal(t, int64(3), m.Totals.Sent)
	require.Equal(t, int64(2), m.Totals.Delivered)
	m, err = svc.EmailMetrics(ctx, b, q)
	require.NoError(t, err)
	require.Equal(t, int64(1), m.Totals.Sent, "B's metrics count only B's mail")
	require.Equal(t, int64(1), m.Totals.Delivered)

	used, err := svc.QuotaUsed(ctx, a, now)
	require.NoError(t, err)
	require.Equal(t, int64(3), used)
	used, err = svc.QuotaUsed(ctx, b, now)
	require.NoError(t, err)
	require.Equal(t, int64(1), used)
	used, err = svc.QuotaUsed(ctx, a, now.AddDate(0, 1, 0))
	require.NoError(t, err)
	require.Zero(t, used, "the quota is per month")

	// Account health: before any evaluation, the default window and no
	// pause; counted now.
	h, err := svc.Health(ctx, a, time.Now())
	require.NoError(t, err)
	require.Equal(t, health.DefaultWindow, h.Window)
	require.Nil(t, h.Paused)
	require.Equal(t, health.Counts{Delivered: 2, Bounced: 1}, h.Counts)

	// Team A bounces past the threshold and is paused by an evaluation
	// over a week; team B is not, and counts only its own.
	storetest.SeedOutcomes(t, st, a, map[string]int{"delivered": 90, "bounced": 10})
	week := 7 * 24 * time.Hour
	_, err = st.Insights.EvaluateHealth(ctx, time.Now(), week, true)
	require.NoError(t, err)
	h, err = svc.Health(ctx, a, time.Now())
	require.NoError(t, err)
	require.Equal(t, week, h.Window, "the window of the last evaluation")
	require.NotNil(t, h.Paused)
	require.Equal(t, health.Bounce, h.Paused.Metric)
	require.Equal(t, health.Counts{Delivered: 92, Bounced: 11}, h.Counts)
	h, err = svc.Health(ctx, b, time.Now())
	require.NoError(t, err)
	require.Nil(t, h.Paused, "B's sending is not paused by A's bounces")
	require.Equal(t, health.Counts{Delivered: 1}, h.Counts)
}

// TestUsage: GET /usage's counts are the team's own: its recipients of the
// day and of the month, its plan's volume and rate limit, its contacts and
// segments; another team's mail and rows count nothing, and a new month
// starts the email counts again.
func TestUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	svc := usage.New(st.Insights, st.Accounts)
	a, b := newTeam(t, st), newTeam(t, st)
	now := time.Now().UTC()
	require.NoError(t, st.Accounts.SetPlan(ctx, a, "50k"))
	require.NoError(t, st.Accounts.SetRateLimit(ctx, a, 7))

	send(t, st, a, map[string]string{"r1@dest.test": store.EventDelivered, "r2@dest.test": store.EventBounced}, now)
	send(t, st, a, map[string]string{"r3@dest.test": store.EventDelivered}, now)
	send(t, st, b, map[string]string{"r4@dest.test": store.EventDelivered}, now)
	for _, addr := range []string{"c1@example.com", "c2@example.com"} {
		_, err := st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: a, Email: addr}, nil, nil)
		require.NoError(t, err)
	}
	_, err := st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: b, Name: "B's"})
	require.NoError(t, err)

	u, err := svc.Usage(ctx, a, now)
	require.NoError(t, err)
	require.Equal(t, store.TeamUsage{PlanEmails: 50_000, RateLimit: 7, MonthUsed: 3, DaySent: 3, Contacts: 2}, u.TeamUsage)
	require.Equal(t, store.QuotaMonth(now), u.MonthStart)
	require.Equal(t, store.QuotaMonth(now).AddDate(0, 1, 0), u.MonthEnd)
	require.True(t, !u.DayStart.After(now) && u.DayEnd.After(now) && u.DayEnd.Sub(u.DayStart) == 24*time.Hour)

	u, err = svc.Usage(ctx, b, now)
	require.NoError(t, err)
	require.Equal(t, store.TeamUsage{PlanEmails: 3_000, MonthUsed: 1, DaySent: 1, Segments: 1}, u.TeamUsage,
		"B counts only its own, on the free plan at the default rate")

	u, err = svc.Usage(ctx, a, now.AddDate(0, 1, 0))
	require.NoError(t, err)
	require.Zero(t, u.MonthUsed, "a new month")
	require.Zero(t, u.DaySent, "a new day")
	require.Equal(t, int64(2), u.Contacts, "rows are not per period")

	_, err = svc.Usage(ctx, uuid.New(), now)
	require.ErrorIs(t, err, store.ErrNotFound)
}
