package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/usage"
	"github.com/posthaste/posthaste/internal/webhook"
)

// TestMain runs four tests per CPU at once: they wait on PostgreSQL and
// loopback HTTP far more than they compute.
func TestMain(m *testing.M) {
	pgtest.RaiseParallel(4)
	os.Exit(pgtest.Run(m))
}

// notifier counts Notify calls; requests call it concurrently.
type notifier struct{ n atomic.Int64 }

func (n *notifier) Notify() { n.n.Add(1) }

type env struct {
	waker   *waker
	t       testing.TB
	srv     *httptest.Server
	store   *store.Store
	notify  *notifier
	logs    *reqlog.Writer
	metrics *telemetry.Metrics
	keyA    string // full access, team A
	keyB    string // full access, team B
	teamA   uuid.UUID
	teamB   uuid.UUID
	verify  *verifier
	api     *api.Server
}

// verifier records the domains the API asks to verify or forget; the real
// one (package worker) is exercised by the end-to-end tests.
type verifier struct {
	mu       sync.Mutex
	verified []string
	forgot   []string
}

func (v *verifier) Verify(_ context.Context, id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.verified = append(v.verified, id)
	return nil
}

func (v *verifier) Forget(_ context.Context, id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forgot = append(v.forgot, id)
	return nil
}

// envOptions vary the server of a test; the zero value is the production
// wiring with a rate limit high enough not to matter.
type envOptions struct {
	rate    int              // default requests per second; 0 → 10,000
	limiter api.Limiter      // nil → an in-process limiter
	clock   *clocktest.Clock // clocks the in-process limiter; nil → time.Now
	store   *store.Store     // nil → a new database
	logCfg  *reqlog.Config   // nil → defaults with a 100 ms interval
	fetch   submit.Fetcher   // fetches `path` attachments; nil refuses them
	// keyCache is how long a key's team (and its rate limit) is cached;
	// 0 → 1 s, negative → not cached.
	keyCache time.Duration
	// records is the operator's side of domains' records; nil → a bounce
	// host, an SPF include and a tracking host.
	records *records.Config
	// configure changes the server's configuration before it is built;
	// st is its database.
	configure func(cfg *api.Config, st *store.Store)
}

func newEnv(t testing.TB) *env { return newEnvWith(t, envOptions{}) }

func newEnvWith(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	st, mailA, mailB := o.store, "a@example.com", "b@example.com"
	if st == nil {
		st = storetest.New(t)
	} else { // a shared database: its users must differ
		mailA, mailB = "a-"+uuid.NewString()+"@example.com", "b-"+uuid.NewString()+"@example.com"
	}
	recs := records.Config{BounceHost: "bounce.posthaste.example", SPFInclude: "_spf.posthaste.example",
		TrackingHost: "track.posthaste.example"}
	if o.records != nil {
		recs = *o.records
	}
	n := &notifier{}
	v := &verifier{}
	wk := &waker{}
	mk, err := seal.NewKey()
	require.NoError(t, err)
	raw, err := seal.ParseKey(mk)
	require.NoError(t, err)
	box, err := seal.New(raw)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	if o.rate == 0 {
		o.rate = 10_000
	}
	if o.limiter == nil {
		var cfg ratelimit.LocalConfig
		if o.clock != nil {
			cfg.Now = o.clock.Now
		}
		o.limiter = ratelimit.NewLocal(cfg)
	}
	switch {
	case o.keyCache == 0:
		o.keyCache = time.Second
	case o.keyCache < 0:
		o.keyCache = 0
	}
	lc := reqlog.Config{Interval: 100 * time.Millisecond}
	if o.logCfg != nil {
		lc = *o.logCfg
	}
	lc.Dropped = metrics.RequestLogDropped
	logs := reqlog.New(lc, st.Insights)
	t.Cleanup(func() { _ = logs.Close(context.Background()) })
	cfg := api.Config{
		Auth:     auth.NewAuthenticator(st.Accounts, o.keyCache),
		Submit:   submit.New(submit.Config{Store: submit.StoreOf(st), Notifier: n, Fetcher: o.fetch, PublicURL: "https://posthaste.example"}),
		Emails:   submit.NewEmails(st.Emails),
		Received: receiving.New(st.Received),
		Usage:    usage.New(st.Insights, st.Accounts),
		Accounts: account.New(account.Config{Store: st}),
		AuditLog: auditlog.New(st),
		Metrics:  metrics,
		Gatherer: reg,
		Ready:    []api.Check{{Name: "postgres", Check: st.Ping}},
		// The use cases cmd/posthaste builds once for the API and the dashboard.
		Domains: domains.New(domains.Config{Keys: box, DKIMSelector: "posthaste", Verifier: v}, st),
		Webhooks: webhook.NewEndpoints(webhook.EndpointsConfig{Keys: box, Waker: wk, AllowHTTP: true,
			Client: webhook.NewClient(egress.New(egress.Config{AllowPrivate: true}), webhook.ClientConfig{Timeout: 2 * time.Second})}, st),
		Imports:          imports.New(imports.Config{Outbox: n}, st),
		Audience:         audience.New(st.Audience),
		DataRequests:     datareq.New(datareq.Config{Keys: box, Outbox: n}, st),
		Templates:        templates.New(st),
		Automations:      automations.NewService(st),
		Records:          recs,
		Keys:             box,
		Limiter:          o.limiter,
		DefaultRateLimit: o.rate,
		RequestLog:       logs,
	}
	if o.configure != nil {
		o.configure(&cfg, st)
	}
	h, err := api.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(specCheck(t, h))
	t.Cleanup(srv.Close)
	a, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "A", mailA)
	require.NoError(t, err)
	b, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "B", mailB)
	require.NoError(t, err)
	return &env{t: t, srv: srv, store: st, notify: n, logs: logs, metrics: metrics, keyA: a.APIKey, keyB: b.APIKey,
		teamA: uuid.MustParse(a.TeamID), teamB: uuid.MustParse(b.TeamID), verify: v, waker: wk, api: h}
}

type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (e *env) do(method, path, key string, body any) resp {
	e.t.Helper()
	return e.doH(method, path, key, body, nil)
}

// doH is do with extra request headers.
func (e *env) doH(method, path, key string, body any, headers map[string]string) resp {
	e.t.Helper()
	r, err := e.try(method, path, key, body, headers)
	require.NoError(e.t, err)
	return r
}

// try is doH for goroutines the test starts: it returns its error, for
// the test's goroutine to check, instead of failing the test.
func (e *env) try(method, path, key string, body any, headers map[string]string) (resp, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case io.Reader:
		r = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return resp{}, fmt.Errorf("encoding the request body: %w", err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		return resp{}, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, fmt.Errorf("reading the response to %s %s: %w", method, path, err)
	}
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &out.body)
	return out, nil
}

func requireError(t *testing.T, r resp, status int, name string) {
	t.Helper()
	require.Equal(t, status, r.status, string(r.raw))
	require.Equal(t, name, r.body["name"], string(r.raw))
	require.Equal(t, float64(status), r.body["statusCode"], string(r.raw))
	require.NotEmpty(t, r.body["message"])
}

var sandboxSend = map[string]any{
	"from":    "Acme <onboarding@posthaste.test>",
	"to":      "delivered@posthaste.test",
	"subject": "Hello",
	"html":    "<p>Hi</p>",
	"tags":    []map[string]string{{"name": "category", "value": "welcome"}},
}

func TestAuthErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	requireError(t, e.do("GET", "/emails", "", nil), 401, "missing_api_key")
	requireError(t, e.do("GET", "/emails", "ph_"+strings.Repeat("x", 40), nil), 403, "invalid_api_key")
	requireError(t, e.do("GET", "/emails", "garbage", nil), 403, "invalid_api_key")

	// A sending-only key sends but cannot read.
	token, _, err := account.NewKey(context.Background(), e.store, e.teamA, nil, "send", store.PermissionSendingAccess)
	require.NoError(t, err)
	require.Equal(t, 200, e.do("POST", "/emails", token, sandboxSend).status)
	requireError(t, e.do("GET", "/emails", token, nil), 401, "restricted_api_key")
	requireError(t, e.do("GET", "/api-keys", token, nil), 401, "restricted_api_key")
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	requireError(t, e.do("GET", "/nope", e.keyA, nil), 404, "not_found")
	requireError(t, e.do("PUT", "/emails", e.keyA, nil), 405, "method_not_allowed")
	requireError(t, e.do("GET", "/emails/not-a-uuid", e.keyA, nil), 422, "invalid_parameter")
	requireError(t, e.do("GET", "/emails/"+uuid.NewString(), e.keyA, nil), 404, "not_found")
	require.Equal(t, 200, e.do("GET", "/healthz", "", nil).status)
	require.Equal(t, 200, e.do("GET", "/readyz", "", nil).status)
	m := e.do("GET", "/metrics", "", nil)
	require.Equal(t, 200, m.status)
	require.Contains(t, string(m.raw), "posthaste_http_requests_total")
}

func TestSendGetListAndIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/emails", e.keyA, sandboxSend)
	require.Equal(t, 200, r.status, string(r.raw))
	id, _ := r.body["id"].(string)
	require.NoError(t, uuid.Validate(id))
	require.EqualValues(t, 1, e.notify.n.Load(), "the dispatcher is told about the new outbox entry")

	g := e.do("GET", "/emails/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, "email", g.body["object"])
	require.Equal(t, "Acme <onboarding@posthaste.test>", g.body["from"])
	require.Equal(t, []any{"delivered@posthaste.test"}, g.body["to"])
	require.Equal(t, "queued", g.body["last_event"])
	require.Equal(t, "<p>Hi</p>", g.body["html"])
	require.Contains(t, string(g.raw), `"from":"Acme <onboarding@posthaste.test>"`, "no HTML escaping in JSON")
	require.Contains(t, g.body, "text")
	require.Nil(t, g.body["text"])
	require.Nil(t, g.body["scheduled_at"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, g.body["created_at"])
	require.Equal(t, []any{map[string]any{"name": "category", "value": "welcome"}}, g.body["tags"])
	require.Equal(t, []any{map[string]any{"email": "delivered@posthaste.test", "status": "queued"}}, g.body["recipients"])

	// Team B sees none of it.
	requireError(t, e.do("GET", "/emails/"+id, e.keyB, nil), 404, "not_found")
	lb := e.do("GET", "/emails", e.keyB, nil)
	require.Equal(t, 200, lb.status)
	require.Empty(t, lb.body["data"])

	for range 2 {
		require.Equal(t, 200, e.do("POST", "/emails", e.keyA, sandboxSend).status)
	}
	l := e.do("GET", "/emails?limit=2", e.keyA, nil)
	require.Equal(t, 200, l.status, string(l.raw))
	require.Equal(t, "list", l.body["object"])
	require.Equal(t, true, l.body["has_more"])
	data := l.body["data"].([]any)
	require.Len(t, data, 2)
	require.NotContains(t, data[0].(map[string]any), "html", "lists leave bodies out")
	last := data[1].(map[string]any)["id"].(string)
	l2 := e.do("GET", "/emails?limit=2&after="+last, e.keyA, nil)
	require.Equal(t, false, l2.body["has_more"])
	require.Equal(t, id, l2.body["data"].([]any)[0].(map[string]any)["id"])

	requireError(t, e.do("GET", "/emails?limit=0", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/emails?limit=101", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/emails?after="+id+"&before="+id, e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/emails?after=zzz", e.keyA, nil), 422, "validation_error")
}

func TestSendValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range sandboxSend {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name    string
		body    any
		status  int
		errName string
	}{
		{"not json", "{nope", 422, "validation_error"},
		{"missing from", with("from", nil), 422, "missing_required_field"},
		{"bad from", with("from", "not an address"), 422, "invalid_parameter"},
		{"missing to", with("to", nil), 422, "missing_required_field"},
		{"missing subject", with("subject", nil), 422, "missing_required_field"},
		{"subject with CRLF", with("subject", "a\r\nBcc: x@y.z"), 422, "validation_error"},
		{"header with CRLF", with("headers", map[string]string{"X-A": "b\r\nc: d"}), 422, "validation_error"},
		{"too many recipients", with("to", manyAddrs(51)), 422, "validation_error"},
		{"bad tag", with("tags", []map[string]string{{"name": "a b", "value": "c"}}), 422, "validation_error"},
		{"attachment without content", with("attachments", []map[string]string{{"filename": "a.txt"}}), 422, "invalid_attachment"},
		{"unverified domain", with("from", "me@example.com"), 403, "validation_error"},
		{"sandbox to a stranger", with("to", "stranger@example.com"), 403, "validation_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireError(t, e.do("POST", "/emails", e.keyA, c.body), c.status, c.errName)
		})
	}
	l := e.do("GET", "/emails", e.keyA, nil)
	require.Empty(t, l.body["data"], "rejected requests leave nothing behind")

	// The sandbox sender may write to the team's own members.
	require.Equal(t, 200, e.do("POST", "/emails", e.keyA, with("to", "A@example.com")).status)
	requireError(t, e.do("POST", "/emails", e.keyB, with("to", "a@example.com")), 403, "validation_error")
}

func manyAddrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "delivered+" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + "@posthaste.test"
	}
	for i := range out {
		out[i] = strings.Replace(out[i], "delivered+", "delivered+"+uuid.NewString()[:8], 1)
	}
	return out
}

func TestSendAcceptsSDKShapesAndChunkedBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := `{"from":"onboarding@posthaste.test","to":["delivered@posthaste.test"],"cc":"complained@posthaste.test",
		"subject":"s","text":"t","attachments":[
		{"filename":"a.txt","content":"aGVsbG8="},
		{"filename":"b.bin","content":{"type":"Buffer","data":[1,2,3]}},
		{"filename":"c.bin","content":[104,105]}]}`
	// An io.Reader of unknown length makes the client send it chunked.
	r := e.do("POST", "/emails", e.keyA, io.MultiReader(strings.NewReader(body)))
	require.Equal(t, 200, r.status, string(r.raw))
	em, err := storetest.EmailForBuild(context.Background(), e.store, uuid.MustParse(r.body["id"].(string)))
	require.NoError(t, err)
	require.Len(t, em.Attachments, 3)
	require.Equal(t, []byte("hello"), em.Attachments[0].Content)
	require.Equal(t, []byte{1, 2, 3}, em.Attachments[1].Content)
	require.Equal(t, []byte("hi"), em.Attachments[2].Content)
	require.Len(t, em.Recipients, 2)
}

func TestBodyOverLimitIs413(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := `{"from":"onboarding@posthaste.test","to":"delivered@posthaste.test","subject":"s","text":"` +
		strings.Repeat("a", 64<<20) + `"}`
	requireError(t, e.do("POST", "/emails", e.keyA, big), 413, "validation_error")
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "ci"})
	require.Equal(t, 201, r.status, string(r.raw))
	token := r.body["token"].(string)
	keyID := r.body["id"].(string)
	require.True(t, strings.HasPrefix(token, "ph_"))
	require.Equal(t, 200, e.do("GET", "/emails", token, nil).status, "the new key works")

	l := e.do("GET", "/api-keys", e.keyA, nil)
	require.Equal(t, 200, l.status)
	names := []string{}
	for _, k := range l.body["data"].([]any) {
		km := k.(map[string]any)
		names = append(names, km["name"].(string))
		require.NotContains(t, km, "token")
	}
	require.ElementsMatch(t, []string{"ci", "Default"}, names)

	requireError(t, e.do("POST", "/api-keys", e.keyA, map[string]any{}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/api-keys", e.keyA, map[string]any{"name": strings.Repeat("n", 51)}), 422, "validation_error")
	requireError(t, e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "x", "permission": "root"}), 422, "validation_error")
	requireError(t, e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "x", "domain_id": uuid.NewString()}), 422, "validation_error")
	requireError(t, e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "x", "permission": "sending_access",
		"domain_id": uuid.NewString()}), 404, "not_found")

	requireError(t, e.do("DELETE", "/api-keys/"+keyID, e.keyB, nil), 404, "not_found")
	d := e.do("DELETE", "/api-keys/"+keyID, e.keyA, nil)
	require.Equal(t, 200, d.status)
	require.Equal(t, map[string]any{"object": "api_key", "id": keyID, "deleted": true}, d.body)
	requireError(t, e.do("GET", "/emails", token, nil), 403, "invalid_api_key")
	requireError(t, e.do("DELETE", "/api-keys/"+keyID, e.keyA, nil), 404, "not_found")
}

func TestDatabaseDownIs503WithoutInternals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.store.Close() // the database goes away
	r := e.do("GET", "/emails", e.keyA, nil)
	requireError(t, r, 503, "service_unavailable")
	require.NotContains(t, string(r.raw), "pool")
	require.Regexp(t, `error id [0-9a-f]{16}`, r.body["message"])
}

func TestPathAttachmentsGoThroughTheEgressGuard(t *testing.T) {
	t.Parallel()
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		_, _ = w.Write([]byte("a,b\n1,2\n"))
	}))
	defer files.Close()
	body := map[string]any{
		"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test", "subject": "report", "text": "attached",
		"attachments": []map[string]string{{"path": files.URL + "/reports/june.csv"}},
	}
	for _, allow := range []bool{false, true} {
		e := newEnvWith(t, envOptions{fetch: egress.New(egress.Config{AllowPrivate: allow})})
		r := e.do("POST", "/emails", e.keyA, body)
		if !allow {
			requireError(t, r, 422, "invalid_attachment")
			require.Contains(t, r.body["message"], "not allowed")
			continue
		}
		require.Equal(t, 200, r.status, string(r.raw))
		em, err := storetest.EmailForBuild(context.Background(), e.store, uuid.MustParse(r.body["id"].(string)))
		require.NoError(t, err)
		require.Len(t, em.Attachments, 1)
		require.Equal(t, "june.csv", em.Attachments[0].Filename)
		require.Equal(t, []byte("a,b\n1,2\n"), em.Attachments[0].Content)
	}
}

// goSDK is Resend's official Go SDK, unchanged, pointed at the test server
// with key.
func (e *env) goSDK(t *testing.T, key string) *resend.Client {
	t.Helper()
	c := resend.NewClient(key)
	base, err := url.Parse(e.srv.URL + "/")
	require.NoError(t, err)
	c.BaseURL = base
	return c
}
