package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
)

// eventually calls cond every tick until it reports true, and fails the
// test when timeout passes first. Unlike require.Eventually it calls cond
// on the test's goroutine, so cond may use require.
func eventually(t testing.TB, timeout, tick time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			require.Fail(t, fmt.Sprintf("condition not met within %s", timeout), msgAndArgs...)
		case <-ticker.C:
		}
	}
}

// waitLogs polls GET /logs until it lists n entries of the query.
func (e *env) waitLogs(key, query string, n int) []any {
	e.t.Helper()
	var data []any
	eventually(e.t, 5*time.Second, 50*time.Millisecond, func() bool {
		r := e.do("GET", "/logs?limit=100"+query, key, nil)
		require.Equal(e.t, 200, r.status, string(r.raw))
		data, _ = r.body["data"].([]any)
		return len(data) >= n
	}, "the log did not show %d entries", n)
	return data
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	send := map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test",
		"subject": "s", "text": "t", "password": "hunter2",
		"attachments": []map[string]any{{"filename": "a.txt", "content": "aGVsbG8gd29ybGQ="}}}
	ok := e.do("POST", "/emails", e.keyA, send)
	require.Equal(t, 200, ok.status, string(ok.raw))
	key := e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "ci"})
	require.Equal(t, 201, key.status)
	requireError(t, e.do("GET", "/emails/"+uuid.NewString(), e.keyA, nil), 404, "not_found")
	requireError(t, e.do("POST", "/emails", e.keyA, "{nope"), 422, "validation_error")
	requireError(t, e.do("GET", "/emails", "", nil), 401, "missing_api_key") // no team: nobody sees it
	e.do("GET", "/healthz", "", nil)                                         // not an API request

	// Everything within 5 s, newest first: the 4 requests of team A (the
	// GET /logs polls themselves are logged too, so filter them out).
	var entries []map[string]any
	eventually(t, 5*time.Second, 50*time.Millisecond, func() bool {
		entries = entries[:0]
		for _, d := range e.waitLogs(e.keyA, "", 1) {
			m := d.(map[string]any)
			if m["endpoint"] != "/logs" {
				entries = append(entries, m)
			}
		}
		return len(entries) == 4
	})
	got := []string{}
	for _, m := range entries {
		require.Equal(t, "log", m["object"])
		require.Equal(t, "Go-http-client/1.1", m["user_agent"])
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, m["created_at"])
		got = append(got, fmt.Sprintf("%s %s %v", m["method"], m["endpoint"], m["response_status"]))
	}
	require.Equal(t, []string{"POST /emails 422", "GET /emails/:id 404", "POST /api-keys 201", "POST /emails 200"},
		normalise(got))

	byStatus := func(status int) map[string]any {
		for _, m := range entries {
			if m["response_status"] == float64(status) {
				return m
			}
		}
		t.Fatalf("no entry with status %d", status)
		return nil
	}
	// The accepted send: the password is redacted, the attachment elided,
	// the response kept.
	d := e.do("GET", "/logs/"+byStatus(200)["id"].(string), e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	req := d.body["request_body"].(map[string]any)
	require.Equal(t, "[redacted]", req["password"])
	require.Equal(t, "[elided: 16 characters]", req["attachments"].([]any)[0].(map[string]any)["content"])
	require.Equal(t, "a.txt", req["attachments"].([]any)[0].(map[string]any)["filename"])
	require.Equal(t, ok.body["id"], d.body["response_body"].(map[string]any)["id"])
	require.NotContains(t, string(d.raw), "hunter2")
	require.NotContains(t, string(d.raw), "aGVsbG8gd29ybGQ=")

	// The created key's token never reaches the log.
	k := e.do("GET", "/logs/"+byStatus(201)["id"].(string), e.keyA, nil)
	require.Equal(t, "[redacted]", k.body["response_body"].(map[string]any)["token"])
	require.NotContains(t, string(k.raw), key.body["token"].(string))

	// A GET has no request body: the key is there, null.
	g := e.do("GET", "/logs/"+byStatus(404)["id"].(string), e.keyA, nil)
	require.Contains(t, g.body, "request_body")
	require.Nil(t, g.body["request_body"])
	require.Equal(t, "not_found", g.body["response_body"].(map[string]any)["name"])
	// A body that is not JSON is kept as text.
	bad := e.do("GET", "/logs/"+byStatus(422)["id"].(string), e.keyA, nil)
	require.Equal(t, "{nope", bad.body["request_body"])

	// Filters and pagination.
	f := e.waitLogs(e.keyA, "&status=404", 1)
	require.Len(t, f, 1)
	f = e.waitLogs(e.keyA, "&path=/api-keys", 1)
	require.Len(t, f, 1)
	p1 := e.do("GET", "/logs?limit=1&path=/emails", e.keyA, nil)
	require.Equal(t, true, p1.body["has_more"])
	first := p1.body["data"].([]any)[0].(map[string]any)["id"].(string)
	p2 := e.do("GET", "/logs?limit=1&path=/emails&after="+first, e.keyA, nil)
	require.Equal(t, false, p2.body["has_more"])
	require.NotEqual(t, first, p2.body["data"].([]any)[0].(map[string]any)["id"])
	requireError(t, e.do("GET", "/logs?status=abc", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/logs?status=99", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/logs?path=emails", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/logs/nope", e.keyA, nil), 422, "invalid_parameter")

	// Team B sees none of team A's entries, and nobody sees the
	// unauthenticated one.
	probe := "/logs/" + byStatus(200)["id"].(string)
	requireError(t, e.do("GET", probe, e.keyB, nil), 404, "not_found")
	// Team B's own requests: its listings and that probe (logged
	// asynchronously, so it may or may not be there yet).
	for _, d := range e.waitLogs(e.keyB, "", 0) {
		require.Contains(t, []string{"/logs", probe}, d.(map[string]any)["endpoint"])
	}
	require.Empty(t, e.waitLogs(e.keyA, "&status=401", 0))
	require.Zero(t, testutil.ToFloat64(e.metrics.RequestLogDropped))
}

// normalise replaces ids in logged paths so the test can compare them.
func normalise(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		parts := strings.Fields(l)
		if strings.HasPrefix(parts[1], "/emails/") {
			parts[1] = "/emails/:id"
		}
		out[i] = strings.Join(parts, " ")
	}
	return out
}

// TestRequestLogRateLimitedAndLargeBodies: a 429 lands in the team's log,
// and bodies are cut at 64 KB. The limit is one request a second, by a
// clock the test moves a second before each of its requests.
func TestRequestLogRateLimitedAndLargeBodies(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Now())
	e := newEnvWith(t, envOptions{rate: 1, clock: clock})
	big := map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test",
		"subject": "s", "text": strings.Repeat("x", 100<<10)}
	require.Equal(t, 200, e.do("POST", "/emails", e.keyA, big).status)
	requireError(t, e.do("GET", "/emails", e.keyA, nil), 429, "rate_limit_exceeded")
	var entries []any
	eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		clock.Advance(time.Second)
		r := e.do("GET", "/logs?status=429", e.keyA, nil)
		require.Equal(t, 200, r.status, string(r.raw))
		entries, _ = r.body["data"].([]any)
		return len(entries) > 0
	})
	require.Equal(t, "/emails", entries[0].(map[string]any)["endpoint"])

	clock.Advance(time.Second)
	r := e.do("GET", "/logs?status=200&path=/emails", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	var post string
	for _, d := range r.body["data"].([]any) {
		if m := d.(map[string]any); m["method"] == "POST" {
			post = m["id"].(string)
		}
	}
	require.NotEmpty(t, post)
	clock.Advance(time.Second)
	d := e.do("GET", "/logs/"+post, e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	body, ok := d.body["request_body"].(string)
	require.True(t, ok, "a body cut at 64 KB is no longer JSON and is shown as text")
	require.Len(t, body, reqlog.MaxBody)
	require.True(t, strings.HasPrefix(body, `{"from":"onboarding@posthaste.test"`), body[:80])
}

// TestRequestLogShutdownWritesEverything: entries still buffered when the
// server stops are all written by Close.
func TestRequestLogShutdownWritesEverything(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{logCfg: &reqlog.Config{Interval: time.Hour, Batch: 10_000}})
	const n = 120
	for range n {
		require.Equal(t, 404, e.do("GET", "/emails/"+uuid.NewString(), e.keyA, nil).status)
	}
	e.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.logs.Close(ctx))
	logs, _, err := e.store.Insights.ListRequestLogs(ctx, e.teamA, store.LogFilter{Status: 404}, store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, logs, 100)
	all := 0
	var after *uuid.UUID
	for {
		page, more, err := e.store.Insights.ListRequestLogs(ctx, e.teamA, store.LogFilter{}, store.Page{Limit: 100, After: after})
		require.NoError(t, err)
		all += len(page)
		if !more {
			break
		}
		after = &page[len(page)-1].ID
	}
	require.Equal(t, n, all)
	require.Zero(t, testutil.ToFloat64(e.metrics.RequestLogDropped))
}
