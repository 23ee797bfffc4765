package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// metricsFixture records, for team A, events of three emails around base
// (noon UTC two days ago) and one unsubscribe now; for team B, one sent.
type metricsFixture struct {
	st               *store.Store
	teamA, teamB     uuid.UUID
	domain           store.Domain
	broadcast        store.Broadcast
	e1, e2, e3       store.Email
	base, rangeStart time.Time
}

func newMetricsFixture(t *testing.T) metricsFixture {
	t.Helper()
	ctx := context.Background()
	st := newStore(t)
	f := metricsFixture{st: st, teamA: newTeam(t, st), teamB: newTeam(t, st)}
	now := time.Now().UTC()
	f.base = time.Date(now.Year(), now.Month(), now.Day()-2, 12, 0, 0, 0, time.UTC)
	f.rangeStart = f.base.Add(-time.Hour)
	f.domain = newDomain(f.teamA, "metrics.test")
	require.NoError(t, st.Domains.CreateDomain(ctx, f.domain))
	b, err := st.Broadcasts.CreateBroadcast(ctx, store.Broadcast{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamA,
		Name: "Spring news", From: "news@metrics.test", Subject: "News"})
	require.NoError(t, err)
	f.broadcast = b

	at := func(d time.Duration) time.Time { return f.base.Add(d) }
	bounce := func(typ string) map[string]any {
		return map[string]any{"type": typ, "subType": "General", "message": "no", "diagnosticCode": []string{}}
	}
	machine := map[string]any{"machine": true}

	f.e1 = newEmail(f.teamA, "r1@x.test", "r2@x.test")
	f.e1.DomainID = &f.domain.ID
	f.e1.CreatedAt = f.base
	f.e2 = newEmail(f.teamA, "r3@x.test")
	f.e2.DomainID, f.e2.BroadcastID = &f.domain.ID, &b.ID
	f.e2.CreatedAt = f.base
	f.e3 = newEmail(f.teamA, "r4@x.test", "r5@x.test")
	f.e3.CreatedAt = f.base
	other := newEmail(f.teamB, "b@x.test")
	for _, e := range []store.Email{f.e1, f.e2, f.e3, other} {
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
	}
	require.NoError(t, st.Emails.RecordEvents(ctx, f.e1.ID, []store.Event{
		{Type: store.EventSent, Recipient: "r1@x.test", CreatedAt: at(0)},
		{Type: store.EventSent, Recipient: "r2@x.test", CreatedAt: at(0)},
		{Type: store.EventDelivered, Recipient: "r1@x.test", CreatedAt: at(time.Minute)},
		{Type: store.EventBounced, Recipient: "r2@x.test", CreatedAt: at(time.Minute), Detail: bounce("Permanent")},
		{Type: "opened", Recipient: "r1@x.test", CreatedAt: at(2 * time.Hour)},
		{Type: "opened", Recipient: "r1@x.test", CreatedAt: at(3 * time.Hour)},
		{Type: "opened", Recipient: "r1@x.test", CreatedAt: at(3 * time.Hour), Detail: machine},
		// 16:00 UTC is 01:00 the next day in Tokyo.
		{Type: "clicked", Recipient: "r1@x.test", CreatedAt: at(4 * time.Hour), Detail: map[string]any{"link": "https://a.test"}},
		{Type: "clicked", Recipient: "r1@x.test", CreatedAt: at(4 * time.Hour), Detail: map[string]any{"link": "https://a.test", "machine": true}},
	}))
	require.NoError(t, st.Emails.RecordEvents(ctx, f.e2.ID, []store.Event{
		{Type: store.EventSent, Recipient: "r3@x.test", CreatedAt: at(24 * time.Hour)},
		{Type: store.EventDelivered, Recipient: "r3@x.test", CreatedAt: at(24 * time.Hour)},
		// A delivery status notification after delivery.
		{Type: store.EventBounced, Recipient: "r3@x.test", CreatedAt: at(25 * time.Hour), Detail: bounce("Transient"), Async: true},
		{Type: store.EventComplained, Recipient: "r3@x.test", CreatedAt: at(25 * time.Hour)},
	}))
	require.NoError(t, st.Emails.RecordEvents(ctx, f.e3.ID, []store.Event{
		{Type: store.EventDeliveryDelayed, Recipient: "r4@x.test", CreatedAt: at(time.Hour)},
		{Type: store.EventFailed, Recipient: "r4@x.test", CreatedAt: at(2 * time.Hour)},
		{Type: store.EventSuppressed, Recipient: "r5@x.test", CreatedAt: at(time.Hour)},
		// Before the range: not counted.
		{Type: store.EventSent, Recipient: "r5@x.test", CreatedAt: at(-2 * time.Hour)},
	}))
	require.NoError(t, st.Audience.RecordBroadcastUnsubscribe(ctx, f.teamA, b.ID, f.e2.ID, "r3@x.test"))
	require.NoError(t, st.Emails.RecordEvents(ctx, other.ID, []store.Event{{Type: store.EventSent, Recipient: "b@x.test", CreatedAt: at(0)}}))
	return f
}

func TestEmailMetricsCountsAndTeamIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newMetricsFixture(t)
	end := time.Now().Add(time.Minute)
	m, err := f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.rangeStart, End: end})
	require.NoError(t, err)
	require.Empty(t, m.Rows, "no dimensions, no rows")
	require.Equal(t, store.MetricCounts{Sent: 3, Delivered: 2, DeliveryDelayed: 1, Bounced: 2, BouncedTransient: 1,
		BouncedPermanent: 1, Complained: 1, Opened: 2, UniqueOpened: 1, Clicked: 1, UniqueClicked: 1, Suppressed: 1,
		Unsubscribed: 1, Failed: 1}, m.Totals)
	require.Equal(t, 3.0, m.Totals.Value("sent"))
	require.Equal(t, 66.67, m.Totals.Value("delivery_rate"))
	require.Equal(t, 66.67, m.Totals.Value("bounce_rate"))
	require.Equal(t, 50.0, m.Totals.Value("open_rate"), "unique opens of delivered")
	require.Equal(t, 50.0, m.Totals.Value("click_rate"))
	require.Equal(t, 50.0, m.Totals.Value("complaint_rate"))
	require.Equal(t, 50.0, m.Totals.Value("unsubscribe_rate"))
	require.Len(t, store.MetricNames, 22)

	b, err := f.st.Insights.EmailMetrics(ctx, f.teamB, store.MetricsQuery{Start: f.rangeStart, End: end,
		ByPeriod: true, ByDomain: true, ByBroadcast: true})
	require.NoError(t, err)
	require.Equal(t, store.MetricCounts{Sent: 1}, b.Totals, "team B sees its own email only")
	require.Len(t, b.Rows, 1)
	b, err = f.st.Insights.EmailMetrics(ctx, f.teamB, store.MetricsQuery{Start: f.rangeStart, End: end,
		EmailIDs: []uuid.UUID{f.e1.ID}, DomainIDs: []uuid.UUID{f.domain.ID}})
	require.NoError(t, err)
	require.Equal(t, store.MetricCounts{}, b.Totals, "team B filtering on team A's ids sees nothing")

	// The range is half-open and bounds the events by when they happened.
	m, err = f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.base, End: f.base.Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, store.MetricCounts{Sent: 2}, m.Totals)
}

func TestEmailMetricsBreakdowns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newMetricsFixture(t)
	end := f.base.Add(48 * time.Hour)
	day := func(d int) time.Time {
		return time.Date(f.base.Year(), f.base.Month(), f.base.Day()+d, 0, 0, 0, 0, time.UTC)
	}

	m, err := f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.rangeStart, End: f.base.Add(30 * time.Hour), ByPeriod: true})
	require.NoError(t, err)
	require.Len(t, m.Rows, 2)
	require.True(t, day(0).Equal(m.Rows[0].Period), m.Rows[0].Period)
	require.Equal(t, int64(2), m.Rows[0].Sent)
	require.Equal(t, int64(1), m.Rows[0].Clicked)
	require.True(t, day(1).Equal(m.Rows[1].Period))
	require.Equal(t, int64(1), m.Rows[1].Sent)
	require.Equal(t, int64(1), m.Rows[1].Complained)

	// In Tokyo (UTC+9, no daylight saving) the click at 16:00 UTC falls on
	// the next day.
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	m, err = f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.rangeStart, End: f.base.Add(5 * time.Hour),
		Location: tokyo, ByPeriod: true})
	require.NoError(t, err)
	require.Len(t, m.Rows, 2)
	d0 := time.Date(f.base.Year(), f.base.Month(), f.base.Day(), 0, 0, 0, 0, tokyo)
	require.True(t, d0.Equal(m.Rows[0].Period), m.Rows[0].Period)
	require.Equal(t, tokyo, m.Rows[0].Period.Location())
	require.Equal(t, int64(0), m.Rows[0].Clicked)
	require.True(t, d0.AddDate(0, 0, 1).Equal(m.Rows[1].Period))
	require.Equal(t, int64(1), m.Rows[1].Clicked)

	// Unique opens are unique per row and over the whole range.
	m, err = f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.rangeStart, End: end, ByPeriod: true,
		Granularity: store.GranularityHourly})
	require.NoError(t, err)
	opened := 0
	for _, r := range m.Rows {
		if r.Opened > 0 {
			opened++
			require.Equal(t, int64(1), r.UniqueOpened)
		}
	}
	require.Equal(t, 2, opened, "two hours with an open")
	require.Equal(t, int64(1), m.Totals.UniqueOpened)

	m, err = f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.rangeStart, End: end, ByDomain: true})
	require.NoError(t, err)
	require.Len(t, m.Rows, 2)
	require.Equal(t, f.domain.ID, *m.Rows[0].DomainID)
	require.Equal(t, "metrics.test", m.Rows[0].DomainName)
	require.Equal(t, int64(3), m.Rows[0].Sent)
	require.Nil(t, m.Rows[1].DomainID, "mail of no domain")
	require.Equal(t, int64(1), m.Rows[1].Failed)

	m, err = f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.rangeStart, End: time.Now().Add(time.Minute),
		ByBroadcast: true, BroadcastIDs: []uuid.UUID{f.broadcast.ID}})
	require.NoError(t, err)
	require.Len(t, m.Rows, 1)
	require.Equal(t, "Spring news", m.Rows[0].BroadcastName)
	require.Equal(t, store.MetricCounts{Sent: 1, Delivered: 1, Complained: 1, Bounced: 1, BouncedTransient: 1,
		Unsubscribed: 1}, m.Rows[0].MetricCounts)
	require.Equal(t, m.Rows[0].MetricCounts, m.Totals)

	m, err = f.st.Insights.EmailMetrics(ctx, f.teamA, store.MetricsQuery{Start: f.rangeStart, End: end, ByEmail: true,
		EmailIDs: []uuid.UUID{f.e3.ID}})
	require.NoError(t, err)
	require.Len(t, m.Rows, 1)
	require.Equal(t, f.e3.ID, *m.Rows[0].EmailID)
	require.Equal(t, store.MetricCounts{DeliveryDelayed: 1, Failed: 1, Suppressed: 1}, m.Rows[0].MetricCounts)
}

func TestMetricPeriods(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		name       string
		start, end time.Time
		loc        *time.Location
		gran       string
		n          int
		first      string
	}{
		{"daily week", utc("2026-07-01T00:00:00Z"), utc("2026-07-08T00:00:00Z"), time.UTC, store.GranularityDaily, 7, "2026-07-01T00:00:00Z"},
		{"daily partial days", utc("2026-07-01T06:30:00Z"), utc("2026-07-07T06:30:00Z"), time.UTC, store.GranularityDaily, 7, "2026-07-01T00:00:00Z"},
		{"hourly over spring forward", time.Date(2026, 3, 8, 0, 0, 0, 0, ny), time.Date(2026, 3, 9, 0, 0, 0, 0, ny), ny, store.GranularityHourly, 23, "2026-03-08T00:00:00-05:00"},
		{"weekly from a Wednesday", utc("2026-07-01T00:00:00Z"), utc("2026-07-15T00:00:00Z"), time.UTC, store.GranularityWeekly, 3, "2026-06-29T00:00:00Z"},
		{"monthly", utc("2026-01-31T00:00:00Z"), utc("2026-03-01T00:00:00Z"), time.UTC, store.GranularityMonthly, 2, "2026-01-01T00:00:00Z"},
		{"empty range", utc("2026-07-01T05:00:00Z"), utc("2026-07-01T05:00:00Z"), time.UTC, store.GranularityDaily, 1, "2026-07-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := store.MetricPeriods(tc.start, tc.end, tc.loc, tc.gran, 10_000)
			require.Len(t, got, tc.n)
			require.Equal(t, tc.first, got[0].Format(time.RFC3339))
		})
	}
	got := store.MetricPeriods(utc("2020-01-01T00:00:00Z"), utc("2026-01-01T00:00:00Z"), time.UTC, store.GranularityHourly, 10_000)
	require.Len(t, got, 10_001, "stops one past the limit")
}
