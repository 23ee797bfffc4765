package dashboard_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/templates"
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

type fixture struct {
	t        *testing.T
	srv      *httptest.Server
	store    *store.Store
	dash     *dashboard.Handler
	a, b     account.Credentials
	verifier *recordingVerifier
	waker    *recordingWaker
	mailer   *fakeMailer
}

// fakeMailer records the dashboard's emails; err makes sending fail.
type fakeMailer struct {
	mu   sync.Mutex
	sent []dashboard.Mail
	err  error
}

func (m *fakeMailer) SendMail(_ context.Context, mail dashboard.Mail) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.sent = append(m.sent, mail)
	return nil
}

func (m *fakeMailer) mails() []dashboard.Mail {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]dashboard.Mail(nil), m.sent...)
}

// publicURL is the fixture's POSTHASTE_PUBLIC_URL, the base of links in emails.
const publicURL = "https://mail.example.test"

type recordingVerifier struct {
	mu        sync.Mutex
	ids       []string
	forgotten []string
}

func (v *recordingVerifier) Forget(_ context.Context, id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forgotten = append(v.forgotten, id)
	return nil
}

func (v *recordingVerifier) Verify(_ context.Context, id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ids = append(v.ids, id)
	return nil
}

// newFixture runs the dashboard with a fake mailer and cheap password
// hashes (passwordtest) on a new database; opts change its configuration.
func newFixture(t *testing.T, opts ...func(*dashboard.Config)) *fixture {
	t.Helper()
	return newFixtureOn(t, storetest.New(t), opts...)
}

// newFixtureOn is newFixture on st, for options that build a service on
// it.
func newFixtureOn(t *testing.T, st *store.Store, opts ...func(*dashboard.Config)) *fixture {
	t.Helper()
	authn := auth.NewAuthenticator(st.Accounts, time.Second)
	v := &recordingVerifier{}
	wk := &recordingWaker{}
	box, err := seal.New(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	mailer := &fakeMailer{}
	cfg := dashboard.Config{Auth: authn, TemporalUIURL: "http://ui.example:8233", Keys: box,
		Records: records.Config{BounceHost: "bounces.posthaste.example", SPFInclude: "spf.posthaste.example"},
		Mailer:  mailer, Passwords: passwordtest.NewPool(), PublicURL: publicURL + "/"}
	for _, o := range opts {
		o(&cfg)
	}
	withServices(&cfg, st, serviceDeps{allowHTTP: true, verifier: v, waker: wk,
		client: webhook.NewClient(egress.New(egress.Config{AllowPrivate: true}), webhook.ClientConfig{})})
	dash, err := dashboard.New(cfg)
	require.NoError(t, err)
	h, err := api.New(api.Config{Auth: authn, Submit: submit.New(submit.Config{Store: submit.StoreOf(st)}),
		Emails: cfg.Emails, Received: cfg.Received, Usage: cfg.Usage, Accounts: cfg.Accounts, AuditLog: cfg.AuditLog,
		Dashboard: dash})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// The teams' owners have passwords of the dashboard's cost: cheap,
	// unless a test gives the dashboard a Pool of its own.
	ctx := context.Background()
	a, err := account.NewTeam(ctx, st, cfg.Passwords, "Team A", "a@example.com")
	require.NoError(t, err)
	b, err := account.NewTeam(ctx, st, cfg.Passwords, "Team B", "b@example.com")
	require.NoError(t, err)
	return &fixture{t: t, srv: srv, store: st, dash: dash, a: a, b: b, verifier: v, waker: wk, mailer: mailer}
}

// serviceDeps are what withServices gives the services besides cfg's:
// allowHTTP accepts plain http webhook endpoints; a nil verifier, waker
// or client leaves it out.
type serviceDeps struct {
	allowHTTP bool
	verifier  domains.Verifier
	waker     webhook.Waker
	client    *webhook.Client
}

// withServices builds on st, from cfg's keys and logger and deps, the use
// cases that cmd/posthaste builds once and hands to the API and the
// dashboard, unless an option set them already.
func withServices(cfg *dashboard.Config, st *store.Store, deps serviceDeps) {
	if cfg.Domains == nil {
		cfg.Domains = domains.New(domains.Config{Keys: cfg.Keys, DKIMSelector: "posthaste", Verifier: deps.verifier,
			Logger: cfg.Logger}, st)
	}
	if cfg.Webhooks == nil {
		cfg.Webhooks = webhook.NewEndpoints(webhook.EndpointsConfig{Keys: cfg.Keys, Client: deps.client,
			Waker: deps.waker, AllowHTTP: deps.allowHTTP, Logger: cfg.Logger}, st)
	}
	if cfg.DataRequests == nil {
		cfg.DataRequests = datareq.New(datareq.Config{Keys: cfg.Keys}, st)
	}
	if cfg.Templates == nil {
		cfg.Templates = templates.New(st)
	}
	if cfg.Emails == nil {
		cfg.Emails = submit.NewEmails(st.Emails)
	}
	if cfg.Received == nil {
		cfg.Received = receiving.New(st.Received)
	}
	if cfg.Audience == nil {
		cfg.Audience = audience.New(st.Audience)
	}
	if cfg.Imports == nil {
		cfg.Imports = imports.New(imports.Config{}, st)
	}
	if cfg.Accounts == nil {
		cfg.Accounts = account.New(account.Config{Store: st})
	}
	if cfg.AuditLog == nil {
		cfg.AuditLog = auditlog.New(st)
	}
	if cfg.Usage == nil {
		cfg.Usage = usage.New(st.Insights, st.Accounts)
	}
}

// browser is a client with a cookie jar that does not follow redirects.
func (f *fixture) browser() *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(f.t, err)
	// The server's own transport: closing another test's httptest server closes
	// the idle connections of http.DefaultTransport, and a POST on one of them
	// fails instead of being retried.
	return &http.Client{Transport: f.srv.Client().Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	res, err := c.PostForm(u, form)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(b)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	require.NotNil(t, m, "page has a csrf field")
	return m[1]
}

func (f *fixture) login(c *http.Client, email, pw string) (*http.Response, string) {
	f.t.Helper()
	_, page := get(f.t, c, f.srv.URL+"/dashboard/login")
	return post(f.t, c, f.srv.URL+"/dashboard/login", url.Values{"csrf": {csrf(f.t, page)}, "email": {email}, "password": {pw}})
}

func TestLoginSessionsAndLogout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()

	res, _ := get(t, c, f.srv.URL+"/")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/", res.Header.Get("Location"))
	res, _ = get(t, c, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "/dashboard/login")

	res, page := get(t, c, f.srv.URL+"/dashboard/login")
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, page, `type="email"`)
	require.Contains(t, page, `type="password"`)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")

	// Without the form's CSRF token nothing happens.
	res, _ = post(t, c, f.srv.URL+"/dashboard/login", url.Values{"email": {f.a.Email}, "password": {f.a.Password}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	res, page = f.login(c, f.a.Email, "wrong")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, page, "Invalid email or password.")
	res, page = f.login(c, "nobody@example.com", "wrong")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, page, "Invalid email or password.", "the same text for unknown users")

	res, _ = f.login(c, strings.ToUpper(f.a.Email), f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var session *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "posthaste_session" {
			session = ck
		}
	}
	require.NotNil(t, session)
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, session.SameSite)

	res, page = get(t, c, f.srv.URL+"/dashboard/emails")
	require.Equal(t, 200, res.StatusCode)
	for _, nav := range []string{">Emails<", ">Metrics<", ">API Keys<"} {
		require.Contains(t, page, nav)
	}

	// A second browser signs in too; "sign out everywhere" ends both.
	other := f.browser()
	res, _ = f.login(other, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = post(t, c, f.srv.URL+"/dashboard/logout-everywhere", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = get(t, other, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the other session ended too")
}

func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	for range 5 {
		res, _ := f.login(c, f.a.Email, "wrong")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	}
	res, page := f.login(c, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "even the right password waits")
	require.Contains(t, page, "Too many failed sign-in attempts")
	res, _ = f.login(c, f.b.Email, f.b.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "other accounts are not locked out")
}

func TestEmailsPagesShowOnlyTheTeamsEmails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	html := `<p>Hello <script>alert(1)</script></p>`
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, From: "onboarding@posthaste.test",
		FromDomain: "posthaste.test", To: []string{"bounced@posthaste.test"}, Subject: "Quarterly <report>",
		HTML: &html, LastEvent: store.EventQueued, CreatedAt: time.Now(),
		Recipients: []store.Recipient{{Address: "bounced@posthaste.test", Kind: "to", Domain: "posthaste.test", Status: "queued"}}}
	_, err := storetest.InsertEmail(ctx, f.store, e)
	require.NoError(t, err)
	_, err = f.store.Emails.SaveMessage(ctx, e.TeamID, e.ID, e.ID.String()+"@posthaste.test", []byte("Subject: Quarterly\r\nX-Test: yes\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nthe text part as sent\r\n"))
	require.NoError(t, err)
	require.NoError(t, f.store.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: "sent"},
		{Type: "bounced", Recipient: "bounced@posthaste.test", Detail: map[string]any{"type": "Permanent"}}}))

	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/emails")
	require.Contains(t, page, "Quarterly &lt;report&gt;", "subjects are escaped")
	require.Contains(t, page, `class="badge bad">bounced<`)
	_, page = get(t, c, f.srv.URL+"/dashboard/emails?status=delivered")
	require.NotContains(t, page, "Quarterly")
	_, page = get(t, c, f.srv.URL+"/dashboard/emails?recipient=BOUNCED")
	require.Contains(t, page, "Quarterly")

	res, page := get(t, c, f.srv.URL+"/dashboard/emails/"+e.ID.String())
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, page, "sandbox src=\"/dashboard/emails/"+e.ID.String()+"/preview\"")
	require.Contains(t, page, "X-Test")
	require.Contains(t, page, "the text part as sent", "the text part is read from the built message")
	require.Contains(t, page, "ui.example:8233/namespaces/default/workflows?query=WorkflowId")
	require.Regexp(t, `(?s)queued.*sent.*bounced`, page, "the event timeline in order")

	res, body := get(t, c, f.srv.URL+"/dashboard/emails/"+e.ID.String()+"/preview")
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "sandbox")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Equal(t, html, body)

	res, body = get(t, c, f.srv.URL+"/dashboard/emails/"+e.ID.String()+"/raw")
	require.Equal(t, "message/rfc822", res.Header.Get("Content-Type"))
	require.Contains(t, body, "X-Test: yes")

	// Team B sees none of it.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, page = get(t, cb, f.srv.URL+"/dashboard/emails")
	require.NotContains(t, page, "Quarterly")
	res, _ = get(t, cb, f.srv.URL+"/dashboard/emails/"+e.ID.String())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = get(t, cb, f.srv.URL+"/dashboard/emails/"+e.ID.String()+"/raw")
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// Metrics count the events (store.EmailMetrics, as GET /emails/metrics
	// does): opens and clicks by people, each also once per recipient.
	require.NoError(t, f.store.Emails.RecordEvents(ctx, e.ID, []store.Event{
		{Type: "opened", Recipient: "bounced@posthaste.test"}, {Type: "opened", Recipient: "bounced@posthaste.test"},
		{Type: "opened", Recipient: "bounced@posthaste.test", Detail: map[string]any{"machine": true}},
		{Type: "clicked", Recipient: "bounced@posthaste.test", Detail: map[string]any{"link": "https://example.com"}}}))
	_, page = get(t, c, f.srv.URL+"/dashboard/metrics?range=24h")
	require.Regexp(t, `data-type="sent"><span class="label">sent</span><span class="count">1<`, page)
	require.Regexp(t, `data-type="bounced"><span class="label">bounced</span><span class="count">1</span><span class="rate">100% of sent`, page)
	require.Regexp(t, `data-type="opened"><span class="label">opened</span><span class="count">2</span><span class="unique">1 unique</span><`, page)
	require.Regexp(t, `data-type="clicked"><span class="label">clicked</span><span class="count">1</span><span class="unique">1 unique</span><`, page)
	require.Contains(t, page, `"labels":[`)
	require.Regexp(t, `"label":"opened","data":\[(0,){23}2\]`, page, "the opens in the last hour of the chart")
	_, page = get(t, c, f.srv.URL+"/dashboard/metrics?range=24h&domain="+uuid.NewString())
	require.Regexp(t, `data-type="sent"><span class="label">sent</span><span class="count">0<`, page, "filtered to a domain the email is not of")
	_, page = get(t, cb, f.srv.URL+"/dashboard/metrics?range=24h")
	require.Regexp(t, `data-type="opened"><span class="label">opened</span><span class="count">0</span><span class="unique">0 unique`, page, "team B sees none of team A's numbers")
	res, _ = get(t, c, f.srv.URL+"/dashboard/assets/chart.umd.min.js")
	require.Equal(t, 200, res.StatusCode)
}

func TestAPIKeysPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/api-keys")
	token := csrf(t, page)

	res, _ := post(t, c, f.srv.URL+"/dashboard/api-keys", url.Values{"name": {"ci"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "CSRF token required")

	res, page = post(t, c, f.srv.URL+"/dashboard/api-keys", url.Values{"csrf": {token}, "name": {"ci"}, "permission": {"sending_access"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	m := regexp.MustCompile(`<code class="token">(ph_[A-Za-z0-9_-]+)</code>`).FindStringSubmatch(page)
	require.NotNil(t, m, "the token is shown once")
	newKey := m[1]

	req, _ := http.NewRequest("GET", f.srv.URL+"/emails", nil)
	req.Header.Set("Authorization", "Bearer "+newKey)
	res, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "a sending key cannot read")

	keys, _, err := f.store.Accounts.ListAPIKeys(context.Background(), uuid.MustParse(f.a.TeamID), store.Page{Limit: 10})
	require.NoError(t, err)
	var id string
	for _, k := range keys {
		if k.Name == "ci" {
			id = k.ID.String()
		}
	}
	require.NotEmpty(t, id)
	res, _ = post(t, c, f.srv.URL+"/dashboard/api-keys/"+id+"/revoke", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	req, _ = http.NewRequest("POST", f.srv.URL+"/emails", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+newKey)
	res, err = f.srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode, "revoked at once")

	// Team B cannot revoke team A's keys.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, pb := get(t, cb, f.srv.URL+"/dashboard/api-keys")
	res, _ = post(t, cb, f.srv.URL+"/dashboard/api-keys/"+keys[0].ID.String()+"/revoke", url.Values{"csrf": {csrf(t, pb)}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

func TestDomainsAndSuppressionsPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	dom := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Name: "shop.test", Region: "eu-west-1",
		Status: store.DomainNotStarted, ReturnPath: "send", TLS: store.TLSOpportunistic, DKIMSelector: "posthaste",
		DKIMPublicKey: "MIIBIjANBgkq", DKIMPrivateKey: []byte("sealed"), RecordStatus: map[string]string{"dkim": "verified"}}
	require.NoError(t, f.store.Domains.CreateDomain(ctx, dom))
	sp, _, err := f.store.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: teamA,
		Email: "gone@shop.test", Reason: "bounce"})
	require.NoError(t, err)

	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/domains")
	require.Contains(t, page, `<a href="/dashboard/domains/`+dom.ID.String()+`">shop.test</a>`)
	require.Contains(t, page, `class="badge neutral">not_started<`)
	_, page = get(t, c, f.srv.URL+"/dashboard/domains/"+dom.ID.String())
	require.Contains(t, page, "posthaste._domainkey")
	require.Contains(t, page, "v=DKIM1; k=rsa; p=MIIBIjANBgkq")
	require.Contains(t, page, "v=spf1 include:spf.posthaste.example ~all")
	require.Contains(t, page, "bounces.posthaste.example")
	require.Contains(t, page, `data-copy="send"`)

	res, _ := post(t, c, f.srv.URL+"/dashboard/domains/"+dom.ID.String()+"/verify", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, []string{dom.ID.String()}, f.verifier.ids)
	got, err := f.store.Domains.GetDomain(ctx, teamA, dom.ID)
	require.NoError(t, err)
	require.Equal(t, store.DomainPending, got.Status)

	_, page = get(t, c, f.srv.URL+"/dashboard/suppressions")
	require.Contains(t, page, "gone@shop.test")
	res, _ = post(t, c, f.srv.URL+"/dashboard/suppressions/"+sp.ID.String()+"/remove", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = get(t, c, f.srv.URL+"/dashboard/suppressions")
	require.NotContains(t, page, "gone@shop.test")

	// Team B can neither see nor touch team A's domain.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, pb := get(t, cb, f.srv.URL+"/dashboard/domains")
	require.NotContains(t, pb, "shop.test")
	res, _ = post(t, cb, f.srv.URL+"/dashboard/domains/"+dom.ID.String()+"/verify", url.Values{"csrf": {csrf(t, pb)}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Len(t, f.verifier.ids, 1)
}

var secretRe = regexp.MustCompile(`<code id="totp-secret">([A-Z2-7]+)</code>`)
var codeRe = regexp.MustCompile(`<li><code>([a-z0-9]{4}-[a-z0-9]{4})</code></li>`)

// enroll turns on TOTP for the signed-in browser and returns the secret
// and the recovery codes.
func (f *fixture) enroll(c *http.Client) (string, []string) {
	t := f.t
	_, page := get(t, c, f.srv.URL+"/dashboard/account")
	require.Contains(t, page, "Set up")
	_, page = post(t, c, f.srv.URL+"/dashboard/account/mfa/start", url.Values{"csrf": {csrf(t, page)}})
	m := secretRe.FindStringSubmatch(page)
	require.NotNil(t, m, page)
	require.Contains(t, page, `src="data:image/png;base64,`)
	res, bad := post(t, c, f.srv.URL+"/dashboard/account/mfa/confirm", url.Values{"csrf": {csrf(t, page)}, "code": {"000000"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	code, err := totp.GenerateCode(m[1], time.Now())
	require.NoError(t, err)
	_, page = post(t, c, f.srv.URL+"/dashboard/account/mfa/confirm", url.Values{"csrf": {csrf(t, bad)}, "code": {code}})
	var codes []string
	for _, cm := range codeRe.FindAllStringSubmatch(page, -1) {
		codes = append(codes, cm[1])
	}
	require.Len(t, codes, 10, page)
	return m[1], codes
}

func TestTOTPSignIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	secret, codes := f.enroll(c)

	// The secret is stored sealed, never in the clear.
	m, err := f.store.Sessions.UserMFA(context.Background(), mustUser(t, f, f.a.Email), uuid.MustParse(f.a.TeamID))
	require.NoError(t, err)
	require.NotContains(t, string(m.SealedSecret), secret)

	// A new sign-in needs the second factor before any page.
	c2 := f.browser()
	res, _ := f.login(c2, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "/dashboard/login/mfa")
	res, _ = get(t, c2, f.srv.URL+"/dashboard/emails")
	require.Equal(t, "/dashboard/login/mfa", res.Header.Get("Location"), "pages wait for the code")
	_, page := get(t, c2, f.srv.URL+"/dashboard/login/mfa")
	res, page = post(t, c2, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {csrf(t, page)}, "code": {"123456"}})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, page, "That code is not valid.")
	// The app's next code: the current one was spent on the setup.
	code, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	res, _ = post(t, c2, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {csrf(t, page)}, "code": {code}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = get(t, c2, f.srv.URL+"/dashboard/emails")
	require.Equal(t, 200, res.StatusCode)

	// A recovery code works once.
	for i, want := range []int{http.StatusSeeOther, http.StatusUnauthorized} {
		c3 := f.browser()
		f.login(c3, f.a.Email, f.a.Password)
		_, page := get(t, c3, f.srv.URL+"/dashboard/login/mfa")
		res, _ := post(t, c3, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {csrf(t, page)}, "code": {strings.ToUpper(codes[0])}})
		require.Equal(t, want, res.StatusCode, "attempt %d", i)
	}
}

func mustUser(t *testing.T, f *fixture, email string) uuid.UUID {
	u, err := f.store.Accounts.UserByEmail(context.Background(), email)
	require.NoError(t, err)
	return u.ID
}

func TestTeamCanRequireTOTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// A second member of team A.
	hash := passwordtest.Hash(t, "member-password")
	member := store.User{ID: uuid.New(), Email: "member@example.com", PasswordHash: hash}
	require.NoError(t, f.store.Accounts.CreateUser(ctx, member))
	require.NoError(t, f.store.Accounts.AddMember(ctx, uuid.MustParse(f.a.TeamID), member.ID, "member"))

	mc := f.browser()
	f.login(mc, member.Email, "member-password")
	_, page := get(t, mc, f.srv.URL+"/dashboard/account")
	res, _ := post(t, mc, f.srv.URL+"/dashboard/account/team-mfa", url.Values{"csrf": {csrf(t, page)}, "require": {"on"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "only owners decide")

	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)
	_, page = get(t, oc, f.srv.URL+"/dashboard/account")
	res, _ = post(t, oc, f.srv.URL+"/dashboard/account/team-mfa", url.Values{"csrf": {csrf(t, page)}, "require": {"on"}})
	require.Equal(t, http.StatusOK, res.StatusCode)

	// The member is sent to set up a second factor before anything else.
	res, _ = get(t, mc, f.srv.URL+"/dashboard/emails")
	require.Equal(t, "/dashboard/account", res.Header.Get("Location"))
	_, page = get(t, mc, f.srv.URL+"/dashboard/account")
	require.Contains(t, page, "Your team requires two-factor authentication")
	f.enroll(mc)
	res, _ = get(t, mc, f.srv.URL+"/dashboard/emails")
	require.Equal(t, 200, res.StatusCode)
}

type recordingWaker struct {
	mu  sync.Mutex
	ids []string
}

func (w *recordingWaker) Wake(_ context.Context, id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, id)
	return nil
}

func TestWebhooksPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	live := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Endpoint: "https://hooks.shop.test/live",
		Events: []string{"email.sent", "email.bounced"}, Status: store.WebhookEnabled, Secret: []byte("sealed")}
	gone := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Endpoint: "https://hooks.shop.test/gone",
		Events: []string{"email.sent"}, Status: store.WebhookEnabled, Secret: []byte("sealed")}
	require.NoError(t, f.store.Webhooks.CreateWebhook(ctx, live))
	require.NoError(t, f.store.Webhooks.CreateWebhook(ctx, gone))
	_, err := f.store.Webhooks.DisableWebhook(ctx, gone.ID, "the endpoint answered 410 Gone")
	require.NoError(t, err)
	msg := store.WebhookMessage{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, WebhookID: live.ID, Type: "email.sent",
		OrderKey: "k", Payload: []byte(`{"type":"email.sent","data":{"subject":"<b>hi</b>"}}`), Status: "attempting"}
	require.NoError(t, f.store.Webhooks.InsertWebhookMessage(ctx, msg))
	code := 503
	_, err = f.store.Webhooks.RecordWebhookAttempt(ctx, store.AttemptOutcome{WebhookID: live.ID, TeamID: teamA, Status: "failed",
		Attempt: store.WebhookAttempt{ID: uuid.Must(uuid.NewV7()), MessageID: msg.ID, AttemptedAt: time.Now(),
			ResponseStatus: &code, ResponseBody: "try later", DurationMS: 12}})
	require.NoError(t, err)

	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/webhooks")
	require.Contains(t, page, "https://hooks.shop.test/live")
	require.Contains(t, page, "email.sent, email.bounced")
	require.Regexp(t, `(?s)https://hooks.shop.test/gone</a> is disabled \(the endpoint answered 410 Gone\)`, page)
	_, page = get(t, c, f.srv.URL+"/dashboard/webhooks/"+live.ID.String())
	require.Contains(t, page, "msg_"+msg.ID.String())

	eventURL := f.srv.URL + "/dashboard/webhooks/" + live.ID.String() + "/events/" + msg.ID.String()
	_, page = get(t, c, eventURL)
	require.Contains(t, page, `class="badge bad">503<`)
	require.Contains(t, page, "try later")
	require.Contains(t, page, "&lt;b&gt;hi&lt;/b&gt;", "the payload is shown escaped")

	res, _ := post(t, c, eventURL+"/replay", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, []string{live.ID.String()}, f.waker.ids)
	m, err := f.store.Webhooks.GetWebhookMessage(ctx, teamA, live.ID, msg.ID)
	require.NoError(t, err)
	require.NotEqual(t, "failed", m.Status, "a replay delivers again")

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, pb := get(t, cb, f.srv.URL+"/dashboard/webhooks")
	require.NotContains(t, pb, "hooks.shop.test")
	res, _ = get(t, cb, eventURL)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

func TestLogsPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.store.Insights.EnsureRequestLogPartitions(ctx, time.Now(), 2))
	teamA, teamB := uuid.MustParse(f.a.TeamID), uuid.MustParse(f.b.TeamID)
	req, resp := `{"from":"onboarding@posthaste.test"}`, `{"name":"rate_limit_exceeded"}`
	ok := store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &teamA, Method: "GET", Path: "/emails", Status: 200,
		ClientAddr: "127.0.0.1", Duration: 3 * time.Millisecond, CreatedAt: time.Now()}
	limited := store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &teamA, Method: "POST", Path: "/emails", Status: 429,
		ClientAddr: "127.0.0.1", Duration: time.Millisecond, RequestBody: &req, ResponseBody: &resp, CreatedAt: time.Now()}
	other := store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &teamB, Method: "GET", Path: "/domains", Status: 200,
		ClientAddr: "127.0.0.1", CreatedAt: time.Now()}
	require.NoError(t, f.store.Insights.InsertRequestLogs(ctx, []store.RequestLog{ok, limited, other}))

	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/logs")
	require.Contains(t, page, `class="badge wait">429<`)
	require.Contains(t, page, `class="badge ok">200<`)
	require.NotContains(t, page, "<code>/domains</code>", "another team's requests")
	_, page = get(t, c, f.srv.URL+"/dashboard/logs?status=429")
	require.NotContains(t, page, `class="badge ok">200<`)
	require.Contains(t, page, limited.ID.String())

	_, page = get(t, c, f.srv.URL+"/dashboard/logs/"+limited.ID.String())
	require.Contains(t, page, "rate_limit_exceeded")
	require.Contains(t, page, "onboarding@posthaste.test")
	res, _ := get(t, c, f.srv.URL+"/dashboard/logs/"+other.ID.String())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

func TestTeamPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	hash := passwordtest.Hash(t, "member-password")
	member := store.User{ID: uuid.New(), Email: "member@example.com", PasswordHash: hash}
	require.NoError(t, f.store.Accounts.CreateUser(ctx, member))
	require.NoError(t, f.store.Accounts.AddMember(ctx, teamA, member.ID, "member"))

	// The member sees the team but cannot remove anyone.
	mc := f.browser()
	f.login(mc, member.Email, "member-password")
	_, page := get(t, mc, f.srv.URL+"/dashboard/team")
	require.Contains(t, page, f.a.Email)
	require.NotContains(t, page, "/remove")
	owner := mustUser(t, f, f.a.Email)
	res, _ := post(t, mc, f.srv.URL+"/dashboard/team/members/"+owner.String()+"/remove", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	// Changing the password needs the current one and ends other sessions.
	res, page = post(t, mc, f.srv.URL+"/dashboard/team/password", url.Values{"csrf": {csrf(t, page)},
		"current": {"wrong"}, "new": {"a-new-long-password"}, "confirm": {"a-new-long-password"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	other := f.browser()
	f.login(other, member.Email, "member-password")
	res, page = post(t, mc, f.srv.URL+"/dashboard/team/password", url.Values{"csrf": {csrf(t, page)},
		"current": {"member-password"}, "new": {"a-new-long-password"}, "confirm": {"a-new-long-password"}})
	require.Equal(t, http.StatusOK, res.StatusCode, page)
	res, _ = get(t, other, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the other session ended")
	res, _ = f.login(f.browser(), member.Email, "a-new-long-password")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the new password works")

	// The owner removes the member, whose session of the team ends.
	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)
	_, page = get(t, oc, f.srv.URL+"/dashboard/team")
	res, _ = post(t, oc, f.srv.URL+"/dashboard/team/members/"+owner.String()+"/remove", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusConflict, res.StatusCode, "the last owner stays")
	res, _ = post(t, oc, f.srv.URL+"/dashboard/team/members/"+member.ID.String()+"/remove", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = get(t, oc, f.srv.URL+"/dashboard/team")
	require.NotContains(t, page, "member@example.com")
	res, _ = get(t, mc, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
}
