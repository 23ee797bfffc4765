package dashboard_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
)

// sessionFrom returns the base64url id the account page gives the session
// of user that was started from addr.
func (f *fixture) sessionFrom(user string, addr string) string {
	f.t.Helper()
	list, err := f.store.Sessions.UserSessions(context.Background(), mustUser(f.t, f, user), time.Now(), 0)
	require.NoError(f.t, err)
	for _, s := range list {
		if s.ClientAddr == addr {
			return base64.RawURLEncoding.EncodeToString(s.IDHash)
		}
	}
	f.t.Fatalf("%s has no session from %s", user, addr)
	return ""
}

func (f *fixture) signedInFrom(addr, email, pw string) *http.Client {
	f.t.Helper()
	c := clientFrom(f.t, addr)
	res, _ := f.login(c, email, pw)
	require.Equal(f.t, http.StatusSeeOther, res.StatusCode)
	return c
}

// TestAccountListsAndRevokesSessions checks that the account page lists
// the user's own sessions with their client address, that each can be
// ended at once, that another user's session cannot be, and that "end all
// other sessions" keeps only the current one.
func TestAccountListsAndRevokesSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ann := f.signedInFrom("127.0.0.2", f.a.Email, f.a.Password)
	annPhone := f.signedInFrom("127.0.0.3", f.a.Email, f.a.Password)
	bob := f.signedInFrom("127.0.0.4", f.b.Email, f.b.Password)

	res, page := get(t, ann, f.srv.URL+"/dashboard/account")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "<code>127.0.0.2</code>")
	require.Contains(t, page, "<code>127.0.0.3</code>")
	require.NotContains(t, page, "127.0.0.4", "bob's session is not ann's")
	require.Equal(t, 1, strings.Count(page, "this session"))
	require.Equal(t, 2, strings.Count(page, `action="/dashboard/account/sessions/revoke"`))
	tok := csrf(t, page)

	res, _ = post(t, ann, f.srv.URL+"/dashboard/account/sessions/revoke",
		url.Values{"csrf": {tok}, "session": {f.sessionFrom(f.b.Email, "127.0.0.4")}})
	require.Equal(t, http.StatusNotFound, res.StatusCode, "another user's session")
	res, _ = get(t, bob, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusOK, res.StatusCode, "bob is still signed in")
	res, _ = post(t, ann, f.srv.URL+"/dashboard/account/sessions/revoke", url.Values{"csrf": {tok}, "session": {"%%%"}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = post(t, ann, f.srv.URL+"/dashboard/account/sessions/revoke",
		url.Values{"session": {f.sessionFrom(f.a.Email, "127.0.0.3")}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "no CSRF token")

	res, _ = post(t, ann, f.srv.URL+"/dashboard/account/sessions/revoke",
		url.Values{"csrf": {tok}, "session": {f.sessionFrom(f.a.Email, "127.0.0.3")}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = get(t, annPhone, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "/dashboard/login", "the revoked session ends at once")

	laptop := f.signedInFrom("127.0.0.5", f.a.Email, f.a.Password)
	res, _ = post(t, ann, f.srv.URL+"/dashboard/account/sessions/revoke-others", url.Values{"csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = get(t, laptop, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the other sessions ended")
	res, page = get(t, ann, f.srv.URL+"/dashboard/account")
	require.Equal(t, http.StatusOK, res.StatusCode, "the current one did not")
	require.Equal(t, 1, strings.Count(page, `action="/dashboard/account/sessions/revoke"`))
	res, _ = get(t, bob, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusOK, res.StatusCode, "nor did bob's")

	res, _ = post(t, ann, f.srv.URL+"/dashboard/account/sessions/revoke",
		url.Values{"csrf": {tok}, "session": {f.sessionFrom(f.a.Email, "127.0.0.2")}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/login", res.Header.Get("Location"), "ending the current session signs out")
	res, _ = get(t, ann, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)

	// Each ending is in the audit log, as ann's action on herself.
	ended := teamAudit(t, f.store, uuid.MustParse(f.a.TeamID), audit.Filter{Action: audit.SessionRevoke})
	require.Len(t, ended, 3, "one session, the others, the current one")
	for _, e := range ended {
		require.Equal(t, audit.ActorUser, e.ActorType)
		require.Equal(t, e.ActorID.String(), e.TargetID)
	}
}

// TestSessionIdleTimeout checks that a session unused for the idle
// timeout sends the browser to sign-in, while one in use lives on.
func TestSessionIdleTimeout(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Now())
	f := newFixture(t, func(c *dashboard.Config) { c.Now, c.SessionIdleTimeout = clock.Now, time.Hour })
	c := f.browser()
	res, _ := f.login(c, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	for range 3 { // used every 50 minutes: alive well past the first hour
		clock.Advance(50 * time.Minute)
		res, _ = get(t, c, f.srv.URL+"/dashboard/emails")
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
	clock.Advance(time.Hour)
	res, _ = get(t, c, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "/dashboard/login", "idle for an hour")
	list, err := f.store.Sessions.UserSessions(context.Background(), mustUser(t, f, f.a.Email), clock.Now(), time.Hour)
	require.NoError(t, err)
	require.Empty(t, list, "nor is it listed")
}

// TestAPIKeysPageSetsAllowedIPs checks that a key created on the API Keys
// page with allowed addresses works only from them, and that an invalid
// range is refused with the reason.
func TestAPIKeysPageSetsAllowedIPs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/api-keys")
	tok := csrf(t, page)

	res, page := post(t, c, f.srv.URL+"/dashboard/api-keys",
		url.Values{"csrf": {tok}, "name": {"office"}, "allowed_ips": {"10.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	m := regexp.MustCompile(`<code class="token">(ph_[A-Za-z0-9_-]+)</code>`).FindStringSubmatch(page)
	require.NotNil(t, m)
	require.Contains(t, page, "only from <code>10.0.0.0/8</code>")
	require.Equal(t, http.StatusForbidden, apiStatus(t, f, m[1]), "the test client is 127.0.0.1, outside 10.0.0.0/8")

	res, page = post(t, c, f.srv.URL+"/dashboard/api-keys",
		url.Values{"csrf": {tok}, "name": {"loopback"}, "allowed_ips": {"2001:db8::/32, 127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	m = regexp.MustCompile(`<code class="token">(ph_[A-Za-z0-9_-]+)</code>`).FindStringSubmatch(page)
	require.NotNil(t, m)
	require.Equal(t, http.StatusOK, apiStatus(t, f, m[1]))

	res, page = post(t, c, f.srv.URL+"/dashboard/api-keys",
		url.Values{"csrf": {tok}, "name": {"bad"}, "allowed_ips": {"10.0.0.0/40"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "10.0.0.0/40")
}

func apiStatus(t *testing.T, f *fixture, key string) int {
	t.Helper()
	req, err := http.NewRequest("GET", f.srv.URL+"/emails", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}
