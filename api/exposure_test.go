package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/logtest"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/usage"
	"github.com/posthaste/posthaste/internal/webhook"
)

// recordedLog keeps the request log entries the server hands over.
type recordedLog struct {
	mu      sync.Mutex
	entries []store.RequestLog
}

func (l *recordedLog) Log(e store.RequestLog) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
	return true
}

// last is the newest entry of path; entries are handed over after the
// response is written, so it waits for it.
func (l *recordedLog) last(t *testing.T, path string) store.RequestLog {
	t.Helper()
	var found *store.RequestLog
	eventually(t, 5*time.Second, 10*time.Millisecond, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i := len(l.entries) - 1; i >= 0; i-- {
			if l.entries[i].Path == path {
				e := l.entries[i]
				found = &e
				return true
			}
		}
		return false
	}, "no log entry for %s", path)
	return *found
}

// countingKeys counts the key lookups that reach PostgreSQL.
type countingKeys struct {
	st *store.Store
	n  atomic.Int64
}

func (k *countingKeys) UseAPIKey(ctx context.Context, hash []byte) (store.APIKey, error) {
	k.n.Add(1)
	return k.st.Accounts.UseAPIKey(ctx, hash)
}

// bareEnv is a server whose configuration the test chooses, with its
// request log, key lookups, metrics and process log in reach.
type bareEnv struct {
	srv     *httptest.Server
	store   *store.Store
	key     string
	team    uuid.UUID
	log     *recordedLog
	lookups *countingKeys
	metrics *telemetry.Metrics
	box     *seal.Box
	out     *logtest.Buffer
}

// newBareEnv starts a server; its key cache keeps keys a minute unless
// configure sets Auth to nil: then there is no cache.
func newBareEnv(t *testing.T, configure func(*api.Config)) *bareEnv {
	t.Helper()
	st := storetest.New(t)
	box, err := seal.New(bytes.Repeat([]byte{9}, 32))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	e := &bareEnv{store: st, log: &recordedLog{}, lookups: &countingKeys{st: st}, metrics: telemetry.NewMetrics(reg),
		box: box, out: &logtest.Buffer{}}
	cfg := api.Config{Auth: auth.NewAuthenticator(e.lookups, time.Minute),
		Submit: submit.New(submit.Config{Store: submit.StoreOf(st)}), Emails: submit.NewEmails(st.Emails),
		Received: receiving.New(st.Received), Usage: usage.New(st.Insights, st.Accounts),
		Accounts: account.New(account.Config{Store: st}), AuditLog: auditlog.New(st), Metrics: e.metrics, Gatherer: reg, RequestLog: e.log,
		Ready:    []api.Check{{Name: "postgres", Check: st.Ping}},
		Webhooks: webhook.NewEndpoints(webhook.EndpointsConfig{Keys: box, AllowHTTP: true}, st),
		Audience: audience.New(st.Audience),
		Logger:   slog.New(slog.NewJSONHandler(e.out, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if configure != nil {
		configure(&cfg)
	}
	if cfg.Auth == nil {
		cfg.Auth = auth.NewAuthenticator(e.lookups, 0)
	}
	h, err := api.New(cfg)
	require.NoError(t, err)
	e.srv = httptest.NewServer(specCheck(t, h))
	t.Cleanup(e.srv.Close)
	a, err := account.NewTeam(context.Background(), st, passwordtest.NewPool(), "A", "a@example.com")
	require.NoError(t, err)
	e.key, e.team = a.APIKey, uuid.MustParse(a.TeamID)
	return e
}

// call sends one request; it may run on goroutines the test starts (it
// returns errors instead of failing the test).
func (e *bareEnv) call(method, path string, body string, headers map[string]string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res, raw, err
}

func (e *bareEnv) must(t *testing.T, method, path, body string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	res, raw, err := e.call(method, path, body, headers)
	require.NoError(t, err)
	return res, raw
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

func randomKey(t *testing.T) string {
	tok, _, _, err := auth.NewToken()
	require.NoError(t, err)
	return tok
}

// TestUnknownKeysAreThrottledBeforeTheDatabase: a flood of random keys
// from one client address reaches PostgreSQL only as often as the
// address's lookup budget allows, and the rest are refused with Resend's
// rate-limit error; other addresses (named by a trusted proxy) and cached
// keys are not held up.
func TestUnknownKeysAreThrottledBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Now())
	e := newBareEnv(t, func(c *api.Config) {
		c.KeyLookupRate = 5
		c.Now = clock.Now
		c.TrustedProxies = []string{"127.0.0.1"}
	})
	// The team's key is looked up once and then cached.
	res, raw := e.must(t, "GET", "/emails", "", bearer(e.key))
	require.Equal(t, 200, res.StatusCode, string(raw))
	require.EqualValues(t, 1, e.lookups.n.Load())
	e.lookups.n.Store(0)

	const flood = 200
	from := map[string]string{"X-Forwarded-For": "203.0.113.7"}
	statuses := make(chan int, flood)
	errs := make(chan error, flood)
	var wg sync.WaitGroup
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := map[string]string{"Authorization": "Bearer " + randomKeyOrEmpty(), "X-Forwarded-For": from["X-Forwarded-For"]}
			res, raw, err := e.call("GET", "/emails", "", h)
			if err != nil {
				errs <- err
				return
			}
			if res.StatusCode == 429 {
				var body map[string]any
				if err := json.Unmarshal(raw, &body); err != nil || body["name"] != "rate_limit_exceeded" ||
					res.Header.Get("Retry-After") == "" {
					errs <- errors.New("a 429 without Resend's body or Retry-After: " + string(raw))
					return
				}
			}
			statuses <- res.StatusCode
		}()
	}
	wg.Wait()
	close(errs)
	close(statuses)
	for err := range errs {
		require.NoError(t, err)
	}
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	// Five unknown keys spend the budget; at most five more were already
	// looking up when it ran out.
	require.Len(t, count, 2, "only 403 and 429: %v", count)
	require.GreaterOrEqual(t, count[403], 5)
	require.Less(t, count[403], 10)
	require.Equal(t, flood, count[403]+count[429])
	require.EqualValues(t, count[403], e.lookups.n.Load(), "the others never reached PostgreSQL")

	// The cached key works from that address; another address has its own
	// budget; once the first's refilled it may try again.
	res, _ = e.must(t, "GET", "/emails", "", map[string]string{"Authorization": "Bearer " + e.key, "X-Forwarded-For": "203.0.113.7"})
	require.Equal(t, 200, res.StatusCode)
	res, _ = e.must(t, "GET", "/emails", "", map[string]string{"Authorization": "Bearer " + randomKey(t), "X-Forwarded-For": "198.51.100.1"})
	require.Equal(t, 403, res.StatusCode)
	res, _ = e.must(t, "GET", "/emails", "", map[string]string{"Authorization": "Bearer " + randomKey(t), "X-Forwarded-For": "203.0.113.7"})
	require.Equal(t, 429, res.StatusCode)
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	clock.Advance(3 * time.Second)
	res, _ = e.must(t, "GET", "/emails", "", map[string]string{"Authorization": "Bearer " + randomKey(t), "X-Forwarded-For": "203.0.113.7"})
	require.Equal(t, 403, res.StatusCode)
	require.EqualValues(t, count[403]+2, e.lookups.n.Load())

	// Without a key cache every request looks its key up: live keys spend
	// nothing, even fifty at once.
	uncached := newBareEnv(t, func(c *api.Config) { c.KeyLookupRate = 5; c.Now = clock.Now; c.Auth = nil })
	oks := make(chan int, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := uncached.call("GET", "/emails", "", bearer(uncached.key))
			if err != nil {
				oks <- 0
				return
			}
			oks <- res.StatusCode
		}()
	}
	wg.Wait()
	close(oks)
	for code := range oks {
		require.Equal(t, 200, code)
	}
	require.EqualValues(t, 50, uncached.lookups.n.Load())
	for range 5 {
		res, _ = uncached.must(t, "GET", "/emails", "", bearer(randomKey(t)))
		require.Equal(t, 403, res.StatusCode)
	}
	res, _ = uncached.must(t, "GET", "/emails", "", bearer(randomKey(t)))
	require.Equal(t, 429, res.StatusCode)
}

// randomKeyOrEmpty is a fresh well-formed key (goroutines cannot require).
func randomKeyOrEmpty() string {
	tok, _, _, err := auth.NewToken()
	if err != nil {
		return ""
	}
	return tok
}

// TestMetricsMethodLabelIsBounded: methods a client makes up do not make
// new series.
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, nil)
	for i := range 50 {
		res, _ := e.must(t, "X-METHOD-"+strings.Repeat("A", i+1), "/emails", "", nil)
		require.Equal(t, 405, res.StatusCode)
	}
	res, _ := e.must(t, "GET", "/emails", "", bearer(e.key))
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, 2, testutil.CollectAndCount(e.metrics.HTTPRequests), "one series for OTHER, one for GET")
	require.EqualValues(t, 50, testutil.ToFloat64(e.metrics.HTTPRequests.WithLabelValues("OTHER", "unmatched", "405")))
}

// TestRequestBodiesOnlyForAuthenticatedRequests: a request without a valid
// key is logged without its body (nor the answer), one with a key keeps both.
func TestRequestBodiesOnlyForAuthenticatedRequests(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, nil)
	body := `{"from":"onboarding@posthaste.test","to":"delivered@posthaste.test","subject":"anonymous-marker","text":"t"}`
	res, _ := e.must(t, "POST", "/emails", body, nil)
	require.Equal(t, 401, res.StatusCode)
	entry := e.log.last(t, "/emails")
	require.Nil(t, entry.TeamID)
	require.Nil(t, entry.RequestBody, "no key, no body")
	require.Nil(t, entry.ResponseBody)

	res, _ = e.must(t, "POST", "/emails", body, bearer(randomKey(t)))
	require.Equal(t, 403, res.StatusCode)
	entry = e.log.last(t, "/emails")
	require.Nil(t, entry.RequestBody, "an unknown key, no body")

	res, raw := e.must(t, "POST", "/emails", body, bearer(e.key))
	require.Equal(t, 200, res.StatusCode, string(raw))
	entry = e.log.last(t, "/emails")
	require.NotNil(t, entry.TeamID)
	require.NotNil(t, entry.RequestBody)
	require.Contains(t, *entry.RequestBody, "anonymous-marker")
	require.NotNil(t, entry.ResponseBody)
}

// TestOversizeResponseIsRedactedInTheLog: a webhook whose endpoint is long
// enough that its response passes the log's 64 KB cap inside the signing
// secret; the log keeps no character of the secret.
func TestOversizeResponseIsRedactedInTheLog(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, nil)
	create := func(endpoint string) (uuid.UUID, string) {
		id := uuid.Must(uuid.NewV7())
		key := webhook.NewSecret()
		sealed, err := e.box.Seal(key, id[:])
		require.NoError(t, err)
		require.NoError(t, e.store.Webhooks.CreateWebhook(context.Background(), store.Webhook{ID: id, TeamID: e.team,
			Endpoint: endpoint, Events: []string{"email.sent"}, Status: store.WebhookEnabled, Secret: sealed}))
		return id, webhook.FormatSecret(key)
	}
	// Where the secret starts in a short response ...
	short, secret := create("https://example.com/x")
	res, raw := e.must(t, "GET", "/webhooks/"+short.String(), "", bearer(e.key))
	require.Equal(t, 200, res.StatusCode, string(raw))
	at := bytes.Index(raw, []byte(secret))
	require.Positive(t, at)
	// ... puts the cap 20 characters into the secret of a long one.
	pad := 65536 - 20 - at
	long, secret := create("https://example.com/x" + strings.Repeat("a", pad))
	res, raw = e.must(t, "GET", "/webhooks/"+long.String(), "", bearer(e.key))
	require.Equal(t, 200, res.StatusCode)
	require.Greater(t, len(raw), 65536)
	cut := bytes.Index(raw, []byte(secret))
	require.Less(t, cut, 65536)
	require.Greater(t, cut+len(secret), 65536, "the cap falls inside the secret")

	entry := e.log.last(t, "/webhooks/"+long.String())
	require.NotNil(t, entry.ResponseBody)
	require.NotContains(t, *entry.ResponseBody, "whsec_")
	require.NotContains(t, *entry.ResponseBody, secret[:16])
	require.Contains(t, *entry.ResponseBody, `"endpoint":"https://example.com/xaaaa`, "the rest is kept")
}

// TestMetricsAndReadinessDetailsNeedTheToken: with a metrics token,
// /metrics answers only to it and /readyz names its failed checks only to
// it; without one, /readyz never names them.
func TestMetricsAndReadinessDetailsNeedTheToken(t *testing.T) {
	t.Parallel()
	down := errors.New("dial tcp 10.1.2.3:5432: connect: connection refused")
	failing := []api.Check{{Name: "postgres", Check: func(context.Context) error { return down }}}
	e := newBareEnv(t, func(c *api.Config) { c.MetricsToken = "scrape-me"; c.Ready = failing })

	res, raw := e.must(t, "GET", "/metrics", "", nil)
	require.Equal(t, 401, res.StatusCode)
	require.NotContains(t, string(raw), "posthaste_")
	res, _ = e.must(t, "GET", "/metrics", "", bearer("wrong"))
	require.Equal(t, 401, res.StatusCode)
	res, raw = e.must(t, "GET", "/metrics", "", bearer("scrape-me"))
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, string(raw), "posthaste_http_requests_total")

	res, raw = e.must(t, "GET", "/readyz", "", nil)
	require.Equal(t, 503, res.StatusCode)
	require.JSONEq(t, `{"status":"unavailable"}`, string(raw))
	res, raw = e.must(t, "GET", "/readyz", "", bearer("scrape-me"))
	require.Equal(t, 503, res.StatusCode)
	require.Contains(t, string(raw), "10.1.2.3", "the token shows which check failed")
	require.Contains(t, e.out.String(), "10.1.2.3", "and the log always does")

	open := newBareEnv(t, func(c *api.Config) { c.Ready = failing })
	res, raw = open.must(t, "GET", "/readyz", "", nil)
	require.Equal(t, 503, res.StatusCode)
	require.JSONEq(t, `{"status":"unavailable"}`, string(raw))
	res, _ = open.must(t, "GET", "/metrics", "", nil)
	require.Equal(t, 200, res.StatusCode, "without a token /metrics stays open")
}

// TestHSTS: a server reached over https sends Strict-Transport-Security
// on every response, the dashboard's included (RFC 6797).
func TestHSTS(t *testing.T) {
	t.Parallel()
	dash := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("dashboard")) })
	e := newBareEnv(t, func(c *api.Config) { c.HSTS = true; c.Dashboard = dash })
	for _, p := range []string{"/emails", "/dashboard/login", "/healthz", "/nope"} {
		res, _ := e.must(t, "GET", p, "", bearer(e.key))
		require.Equal(t, "max-age=31536000", res.Header.Get("Strict-Transport-Security"), p)
	}
	plain := newBareEnv(t, nil)
	res, _ := plain.must(t, "GET", "/healthz", "", nil)
	require.Empty(t, res.Header.Get("Strict-Transport-Security"))
}

// TestPanicsLeaveTokensOutOfTheLogs: a handler that panics on a path
// holding a token (a password-reset link) has the route logged, not the
// path, and nothing dumped to gin's error writer (which would print the
// request line and its cookies). It swaps gin.DefaultErrorWriter, so it is
// not parallel: Go runs it before any parallel test of the package starts.
func TestPanicsLeaveTokensOutOfTheLogs(t *testing.T) {
	var ginOut logtest.Buffer
	saved := gin.DefaultErrorWriter
	gin.DefaultErrorWriter = &ginOut
	t.Cleanup(func() { gin.DefaultErrorWriter = saved })
	const token = "reset-token-3f9a7c"
	dash := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/dashboard/reset/") {
			panic(http.ErrAbortHandler) // a client gone: gin dumps the request
		}
		panic("boom")
	})
	e := newBareEnv(t, func(c *api.Config) { c.Dashboard = dash })
	_, _, _ = e.call("GET", "/dashboard/reset/"+token, "", map[string]string{"Cookie": "posthaste_session=" + token})
	res, _ := e.must(t, "GET", "/dashboard/invite/"+token, "", nil)
	require.Equal(t, 500, res.StatusCode)
	eventually(t, 5*time.Second, 10*time.Millisecond, func() bool {
		return strings.Contains(e.out.String(), "panic in handler")
	})
	require.NotContains(t, ginOut.String(), token)
	require.NotContains(t, e.out.String(), token)
	require.Contains(t, e.out.String(), `"route":"/dashboard/*path"`)
}
