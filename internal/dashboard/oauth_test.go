package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// oauthFixture is a dashboard whose OAuth settings point at test providers;
// opts change its configuration (it has no mailer unless one sets a
// *fakeMailer, which becomes the fixture's mailer).
func oauthFixture(t *testing.T, oauth func() dashboard.OAuth, opts ...func(*dashboard.Config)) *fixture {
	t.Helper()
	st := storetest.New(t)
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	authn := auth.NewAuthenticator(st.Accounts, time.Second)
	cfg := dashboard.Config{Auth: authn, PublicURL: srv.URL, OAuth: oauth(), Passwords: passwordtest.NewPool()}
	for _, o := range opts {
		o(&cfg)
	}
	withServices(&cfg, st, serviceDeps{})
	dash, err := dashboard.New(cfg)
	require.NoError(t, err)
	h, err = api.New(api.Config{Auth: authn, Submit: submit.New(submit.Config{Store: submit.StoreOf(st)}),
		Emails: cfg.Emails, Received: cfg.Received, Usage: cfg.Usage, Accounts: cfg.Accounts, AuditLog: cfg.AuditLog,
		Dashboard: dash})
	require.NoError(t, err)
	a, err := account.NewTeam(context.Background(), st, cfg.Passwords, "Team A", "a@example.com")
	require.NoError(t, err)
	mailer, _ := cfg.Mailer.(*fakeMailer)
	return &fixture{t: t, srv: srv, store: st, dash: dash, a: a, mailer: mailer}
}

// follow walks a sign-in through the provider: our start, the provider's
// authorize (which answers at once), our callback. It returns the
// callback's response.
func follow(t *testing.T, c *http.Client, start string) *http.Response {
	t.Helper()
	res, _ := get(t, c, start)
	require.Equal(t, http.StatusFound, res.StatusCode)
	authorize := res.Header.Get("Location")
	res, _ = get(t, c, authorize)
	require.Equal(t, http.StatusFound, res.StatusCode, "provider authorize")
	callback := res.Header.Get("Location")
	res, _ = get(t, c, callback)
	return res
}

func TestGoogleSignIn(t *testing.T) {
	t.Parallel()
	m, err := mockoidc.Run()
	require.NoError(t, err)
	defer func() { _ = m.Shutdown() }()
	mc := m.Config()
	signup := true
	f := oauthFixture(t, func() dashboard.OAuth {
		return dashboard.OAuth{Signup: signup,
			Google: dashboard.Provider{ClientID: mc.ClientID, ClientSecret: mc.ClientSecret, Issuer: m.Issuer()}}
	})
	_, page := get(t, f.browser(), f.srv.URL+"/dashboard/login")
	require.Contains(t, page, "Continue with Google")
	require.NotContains(t, page, "Continue with GitHub", "unconfigured providers are not offered")

	// An unknown verified email creates the user and a team of their own.
	m.QueueUser(&mockoidc.MockUser{Subject: "g-1", Email: "New.User@example.com", EmailVerified: true})
	c := f.browser()
	res := follow(t, c, f.srv.URL+"/dashboard/oauth/google/start")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/emails", res.Header.Get("Location"))
	_, page = get(t, c, f.srv.URL+"/dashboard/emails")
	require.Contains(t, page, "new.user@example.com")
	u, err := f.store.Accounts.UserByEmail(context.Background(), "new.user@example.com")
	require.NoError(t, err)
	require.Empty(t, u.PasswordHash)
	require.NotNil(t, u.EmailVerifiedAt, "the provider verified the address")

	// A known email signs into that user.
	m.QueueUser(&mockoidc.MockUser{Subject: "g-2", Email: f.a.Email, EmailVerified: true})
	c = f.browser()
	res = follow(t, c, f.srv.URL+"/dashboard/oauth/google/start")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = get(t, c, f.srv.URL+"/dashboard/emails")
	require.Contains(t, page, `title="Team A"`)

	// An unverified email is refused.
	m.QueueUser(&mockoidc.MockUser{Subject: "g-3", Email: "unverified@example.com", EmailVerified: false})
	res = follow(t, f.browser(), f.srv.URL+"/dashboard/oauth/google/start")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	// A callback whose state was not issued to this browser is refused.
	res, _ = get(t, f.browser(), f.srv.URL+"/dashboard/oauth/google/callback?code=x&state=forged")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	// With sign-up off, unknown emails get no account.
	signup = false
	f2 := oauthFixture(t, func() dashboard.OAuth {
		return dashboard.OAuth{Signup: false,
			Google: dashboard.Provider{ClientID: mc.ClientID, ClientSecret: mc.ClientSecret, Issuer: m.Issuer()}}
	})
	m.QueueUser(&mockoidc.MockUser{Subject: "g-4", Email: "stranger@example.com", EmailVerified: true})
	res = follow(t, f2.browser(), f2.srv.URL+"/dashboard/oauth/google/start")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

// fakeGitHub speaks GitHub's OAuth web flow and the /user/emails API.
type fakeGitHub struct {
	srv    *httptest.Server
	emails []map[string]any
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	g := &fakeGitHub{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "gh-client" || q.Get("code_challenge") == "" {
			http.Error(w, "bad authorize request", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=gh-code&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if r.PostForm.Get("code") != "gh-code" || id != "gh-client" || secret != "gh-secret" || r.PostForm.Get("code_verifier") == "" {
			http.Error(w, `{"error":"bad_verification_code"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"gh-token","token_type":"bearer","scope":"read:user,user:email"}`))
	})
	mux.HandleFunc("GET /user/emails", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer gh-token" {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(g.emails)
	})
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

func TestGitHubSignIn(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	f := oauthFixture(t, func() dashboard.OAuth {
		return dashboard.OAuth{Signup: true,
			GitHub: dashboard.Provider{ClientID: "gh-client", ClientSecret: "gh-secret", URL: gh.srv.URL, APIURL: gh.srv.URL}}
	})
	_, page := get(t, f.browser(), f.srv.URL+"/dashboard/login")
	require.Contains(t, page, "Continue with GitHub")

	gh.emails = []map[string]any{
		{"email": "old@example.com", "primary": false, "verified": true},
		{"email": strings.ToUpper(f.a.Email), "primary": true, "verified": true},
	}
	c := f.browser()
	res := follow(t, c, f.srv.URL+"/dashboard/oauth/github/start?next=/dashboard/metrics")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/metrics", res.Header.Get("Location"))
	_, page = get(t, c, f.srv.URL+"/dashboard/metrics")
	require.Contains(t, page, `title="Team A"`)

	gh.emails = []map[string]any{{"email": "x@example.com", "primary": true, "verified": false}}
	res = follow(t, f.browser(), f.srv.URL+"/dashboard/oauth/github/start")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "an unverified primary email is refused")
}
