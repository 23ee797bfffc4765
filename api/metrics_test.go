package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// metricsEmail stores an email of a team with its events, as the send
// path would have recorded them.
func (e *env) metricsEmail(team uuid.UUID, domainID *uuid.UUID, rcpt string, events ...store.Event) uuid.UUID {
	e.t.Helper()
	ctx := context.Background()
	html := "<p>hi</p>"
	em := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "Ann <ann@metrics.example.test>",
		FromDomain: "metrics.example.test", To: []string{rcpt}, Subject: "hi", LastEvent: store.EventQueued,
		CreatedAt: time.Now().Add(-2 * time.Hour), DomainID: domainID, HTML: &html,
		Recipients: []store.Recipient{{Address: rcpt, Kind: "to", Domain: "x.test", Status: store.EventQueued}}}
	_, err := storetest.InsertEmail(ctx, e.store, em)
	require.NoError(e.t, err)
	require.NoError(e.t, e.store.Emails.RecordEvents(ctx, em.ID, events))
	return em.ID
}

// metricsEnv has, for team A, two emails of its domain (one delivered and
// opened twice by a person and once by a machine, one bounced) and one
// received email; for team B, one sent email.
func metricsEnv(t *testing.T) (*env, string) {
	e := newEnv(t)
	d := e.enableReceiving("metrics.example.test")
	domainID := uuid.MustParse(d["id"].(string))
	hourAgo := time.Now().Add(-time.Hour)
	e.metricsEmail(e.teamA, &domainID, "r1@x.test",
		store.Event{Type: store.EventSent, Recipient: "r1@x.test", CreatedAt: hourAgo},
		store.Event{Type: store.EventDelivered, Recipient: "r1@x.test", CreatedAt: hourAgo},
		store.Event{Type: "opened", Recipient: "r1@x.test", CreatedAt: hourAgo},
		store.Event{Type: "opened", Recipient: "r1@x.test", CreatedAt: hourAgo.Add(time.Minute)},
		store.Event{Type: "opened", Recipient: "r1@x.test", CreatedAt: hourAgo, Detail: map[string]any{"machine": true}})
	e.metricsEmail(e.teamA, &domainID, "r2@x.test",
		store.Event{Type: store.EventSent, Recipient: "r2@x.test", CreatedAt: hourAgo},
		store.Event{Type: store.EventBounced, Recipient: "r2@x.test", CreatedAt: hourAgo,
			Detail: map[string]any{"type": "Permanent", "subType": "NoEmail", "message": "no", "diagnosticCode": []string{}}})
	e.receivedEmail("metrics.example.test")
	e.metricsEmail(e.teamB, nil, "b@x.test", store.Event{Type: store.EventSent, Recipient: "b@x.test", CreatedAt: hourAgo})
	return e, domainID.String()
}

func TestEmailMetricsTotalsAndTeamIsolation(t *testing.T) {
	t.Parallel()
	e, _ := metricsEnv(t)
	r := e.do("GET", "/emails/metrics", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "metrics", r.body["object"])
	require.Equal(t, "daily", r.body["granularity"])
	require.Equal(t, []any{}, r.body["dimensions"])
	require.Len(t, r.body["metrics"], 22)
	require.NotContains(t, r.body, "data", "no dimensions, no data")
	start, err := time.Parse(time.RFC3339, r.body["start_date"].(string))
	require.NoError(t, err)
	end, err := time.Parse(time.RFC3339, r.body["end_date"].(string))
	require.NoError(t, err)
	require.Equal(t, 6*24*time.Hour, end.Sub(start), "start_date defaults to 6 days before end_date")
	require.WithinDuration(t, time.Now(), end, time.Minute, "end_date defaults to now")
	totals := r.body["totals"].(map[string]any)
	require.Len(t, totals, 22)
	for k, v := range map[string]float64{"sent": 2, "delivered": 1, "bounced": 1, "bounced_permanent": 1,
		"bounced_transient": 0, "opened": 2, "unique_opened": 1, "received": 1, "delivery_rate": 50,
		"bounce_rate": 50, "open_rate": 100, "clicked": 0, "click_rate": 0} {
		require.Equal(t, v, totals[k], k)
	}

	r = e.do("GET", "/emails/metrics?dimensions=period,domain", e.keyB, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	totals = r.body["totals"].(map[string]any)
	require.Equal(t, 1.0, totals["sent"], "team B counts its own email")
	for _, k := range []string{"delivered", "bounced", "opened", "received"} {
		require.Equal(t, 0.0, totals[k], "team B sees none of team A's %s", k)
	}
	require.Len(t, r.body["data"], 1)
	r = e.do("GET", "/emails/metrics?dimensions=email&email_id="+uuid.NewString(), e.keyB, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, []any{}, r.body["data"], "a breakdown without rows is an empty list")
}

func TestEmailMetricsBreakdowns(t *testing.T) {
	t.Parallel()
	e, domainID := metricsEnv(t)
	r := e.do("GET", "/emails/metrics?dimensions=period&metrics=sent&metrics=received,sent", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, []any{"sent", "received"}, r.body["metrics"])
	data := r.body["data"].([]any)
	require.Len(t, data, 7, "every day of the range, zeros included")
	sent := 0.0
	for _, row := range data {
		m := row.(map[string]any)
		require.Len(t, m, 3, "period and the two metrics")
		_, err := time.Parse(time.RFC3339, m["period"].(string))
		require.NoError(t, err)
		sent += m["sent"].(float64)
	}
	require.Equal(t, 2.0, sent)
	last := data[6].(map[string]any)
	require.True(t, strings.HasSuffix(last["period"].(string), "T00:00:00.000Z"), last["period"])

	r = e.do("GET", "/emails/metrics?dimensions=domain&metrics=sent,received&domain_id="+domainID, e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, []any{map[string]any{"domain_id": domainID, "domain_name": "metrics.example.test",
		"sent": 2.0, "received": 1.0}}, r.body["data"])

	day := time.Now().Add(-24 * time.Hour).Format("2006-01-02")
	r = e.do("GET", "/emails/metrics?timezone=America/New_York&granularity=hourly&dimensions=period&metrics=sent&start_date="+day+
		"&end_date=2999-01-01T00:00:00Z", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	end, err := time.Parse(time.RFC3339, r.body["end_date"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), end, time.Minute, "a future end_date is clamped to now")
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	first := r.body["data"].([]any)[0].(map[string]any)["period"].(string)
	want, err := time.ParseInLocation("2006-01-02", day, ny)
	require.NoError(t, err)
	require.Equal(t, want.Format("2006-01-02T15:04:05.000Z07:00"), first, "a date is midnight in the time zone")
}

func TestEmailMetricsParameterValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := make([]string, 101)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	id := uuid.NewString()
	for _, tc := range []struct {
		query, param string
	}{
		{"metrics=nope", "metrics"},
		{"metrics=sent,opens", "metrics"},
		{"dimensions=country", "dimensions"},
		{"granularity=yearly", "granularity"},
		{"granularity=", "granularity"},
		{"timezone=Mars/Olympus", "timezone"},
		{"timezone=Local", "timezone"},
		{"timezone=", "timezone"},
		{"start_date=yesterday", "start_date"},
		{"end_date=2026-13-01", "end_date"},
		{"start_date=2026-02-01&end_date=2026-01-01", "start_date"},
		{"domain_id=example.com", "domain_id"},
		{"email_id=" + strings.Join(ids, ","), "email_id"},
		{"broadcast_id=1", "broadcast_id"},
		{"dimensions=email,broadcast", "dimensions"},
		{"email_id=" + id + "&broadcast_id=" + id, "email_id"},
		{"email_id=" + id + "&dimensions=broadcast", "email_id"},
		{"broadcast_id=" + id + "&dimensions=email", "broadcast_id"},
		{"granularity=hourly&start_date=2024-01-01&end_date=2026-01-01", "granularity"},
	} {
		t.Run(tc.query[:min(len(tc.query), 40)], func(t *testing.T) {
			r := e.do("GET", "/emails/metrics?"+tc.query, e.keyA, nil)
			require.Equal(t, 422, r.status, string(r.raw))
			require.Equal(t, "validation_error", r.body["name"])
			require.Contains(t, r.body["message"], "`"+tc.param+"`")
		})
	}
	for _, q := range []string{
		"metrics=sent&metrics=sent,delivered,", "dimensions=period,domain,email", "dimensions=broadcast&broadcast_id=" + id,
		"granularity=monthly&start_date=2020-01-01", "start_date=2026-01-01T10:00:00&timezone=Europe/Paris",
		"granularity=hourly&start_date=2025-01-01T00:00:00Z&end_date=2026-02-21T15:59:59Z",
		"email_id=" + url.QueryEscape(strings.Join(ids[:100], ",")),
	} {
		r := e.do("GET", "/emails/metrics?"+q, e.keyA, nil)
		require.Equal(t, 200, r.status, "%s: %s", q, r.raw)
	}
	r := e.do("GET", "/emails/metrics", "", nil)
	require.Equal(t, 401, r.status, "a key is required")
}

// TestResendNodeSDKMetrics calls GET /emails/metrics with Resend's Node
// SDK, unchanged (testdata/resend-node/metrics.cjs).
func TestResendNodeSDKMetrics(t *testing.T) {
	t.Parallel()
	e, domainID := metricsEnv(t)
	start := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
	out := runResendNode(t, "metrics.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA, "START_DATE="+start)
	var res struct {
		Totals struct {
			Object string
			Totals map[string]float64
		}
		Breakdown struct {
			Metrics    []string
			Dimensions []string
			Data       []map[string]any
		}
		BadError map[string]any `json:"badError"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Equal(t, "metrics", res.Totals.Object)
	require.Equal(t, 2.0, res.Totals.Totals["sent"])
	require.Equal(t, 1.0, res.Totals.Totals["unique_opened"])
	require.Equal(t, []string{"sent", "unique_opened", "delivery_rate"}, res.Breakdown.Metrics)
	require.Equal(t, []string{"period", "domain"}, res.Breakdown.Dimensions)
	require.NotEmpty(t, res.Breakdown.Data, "the days and domain with events")
	sent := 0.0
	for _, row := range res.Breakdown.Data {
		require.Equal(t, domainID, row["domain_id"])
		require.True(t, strings.HasSuffix(row["period"].(string), "T00:00:00.000+09:00"), row["period"])
		sent += row["sent"].(float64)
	}
	require.Equal(t, 2.0, sent)
	require.Equal(t, 50.0, res.Breakdown.Data[0]["delivery_rate"], "the sends and their outcomes share their hour")
	require.Equal(t, "validation_error", res.BadError["name"], fmt.Sprint(res.BadError))
}
