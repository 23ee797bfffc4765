package dashboard_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
)

var resetLinkRe = regexp.MustCompile(regexp.QuoteMeta(publicURL) + `(/dashboard/reset/[A-Za-z0-9_-]{43})\b`)

const resetAnswer = "If an account exists for"

// forgot asks for a reset link for email and waits until any email is out.
func (f *fixture) forgot(email string) (*http.Response, string) {
	t := f.t
	t.Helper()
	c := f.browser()
	_, page := get(t, c, f.srv.URL+"/dashboard/forgot")
	res, page := post(t, c, f.srv.URL+"/dashboard/forgot", url.Values{"csrf": {csrf(t, page)}, "email": {email}})
	f.dash.WaitBackground()
	return res, page
}

// lastResetLink returns the path of the link in the newest email to email.
func (f *fixture) lastResetLink(email string) string {
	f.t.Helper()
	mails := f.mailer.mails()
	require.NotEmpty(f.t, mails)
	m := mails[len(mails)-1]
	require.Equal(f.t, email, m.To)
	require.Equal(f.t, "Reset your Posthaste password", m.Subject)
	link := resetLinkRe.FindStringSubmatch(m.Text)
	require.NotNil(f.t, link, m.Text)
	return link[1]
}

func TestPasswordResetByEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, page := get(t, f.browser(), f.srv.URL+"/dashboard/login")
	require.Contains(t, page, `href="/dashboard/forgot"`)
	res, _ := post(t, f.browser(), f.srv.URL+"/dashboard/forgot", url.Values{"email": {f.a.Email}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "CSRF token required")
	f.dash.WaitBackground()
	require.Empty(t, f.mailer.mails())

	// The owner of team A has a second factor and two sessions.
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	secret, _ := f.enroll(c)
	other := f.browser()
	f.login(other, f.a.Email, f.a.Password)

	// An unknown address gets the same answer and no email.
	res, unknown := f.forgot("nobody@example.com")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, unknown, resetAnswer)
	require.Empty(t, f.mailer.mails())

	res, known := f.forgot("A@Example.com")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, known, resetAnswer)
	first := f.lastResetLink(f.a.Email)

	// A second request replaces the first link.
	f.forgot(f.a.Email)
	link := f.lastResetLink(f.a.Email)
	require.NotEqual(t, first, link)
	res, page = get(t, f.browser(), f.srv.URL+first)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Contains(t, page, "This link does not work")

	rc := f.browser()
	res, page = get(t, rc, f.srv.URL+link)
	require.Equal(t, http.StatusOK, res.StatusCode)
	res, page = post(t, rc, f.srv.URL+link, url.Values{"password": {"a-new-long-password"}, "confirm": {"a-new-long-password"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "CSRF token required")
	res, page = post(t, rc, f.srv.URL+link, url.Values{"csrf": {csrf(t, page)}, "password": {"short"}, "confirm": {"short"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	res, page = post(t, rc, f.srv.URL+link, url.Values{"csrf": {csrf(t, page)}, "password": {"a-new-long-password"},
		"confirm": {"a-new-long-password"}})
	require.Equal(t, http.StatusOK, res.StatusCode, page)
	require.Contains(t, page, "Your password was changed")

	// Every session ended; the link worked once.
	for _, b := range []*http.Client{c, other} {
		res, _ = get(t, b, f.srv.URL+"/dashboard/emails")
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Contains(t, res.Header.Get("Location"), "/dashboard/login")
	}
	res, _ = get(t, f.browser(), f.srv.URL+link)
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// The old password is gone; the new one still needs the second factor.
	res, _ = f.login(f.browser(), f.a.Email, f.a.Password)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	nc := f.browser()
	res, _ = f.login(nc, f.a.Email, "a-new-long-password")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "/dashboard/login/mfa")
	res, _ = get(t, nc, f.srv.URL+"/dashboard/emails")
	require.Equal(t, "/dashboard/login/mfa", res.Header.Get("Location"), "not past the second factor")
	_, page = get(t, nc, f.srv.URL+"/dashboard/login/mfa")
	// The app's next code: the current one was spent on the setup.
	code, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	res, _ = post(t, nc, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {csrf(t, page)}, "code": {code}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)

	// An expired link gets the same page and changes nothing.
	sum := sha256.Sum256([]byte("expired-token"))
	require.NoError(t, f.store.Accounts.RequestPasswordReset(context.Background(), mustUser(t, f, f.b.Email), sum[:], time.Now().Add(-time.Second)))
	res, page = get(t, f.browser(), f.srv.URL+"/dashboard/reset/expired-token")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Contains(t, page, "This link does not work")
	res, _ = post(t, f.browser(), f.srv.URL+"/dashboard/reset/expired-token", url.Values{"password": {"a-new-long-password"},
		"confirm": {"a-new-long-password"}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = f.login(f.browser(), f.b.Email, f.b.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "team B's password is unchanged")
}

func TestPasswordResetThrottle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for range 5 {
		res, _ := f.forgot(f.a.Email)
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
	res, page := f.forgot(f.a.Email)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Contains(t, page, "Too many reset requests")
	require.Len(t, f.mailer.mails(), 5)
	res, _ = f.forgot(f.b.Email)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "one client address asks a few times only")
	res, _ = f.login(f.browser(), f.a.Email, f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "asking does not lock sign-in")
}

func TestPasswordResetWithoutEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *dashboard.Config) { c.Mailer = nil })
	_, page := get(t, f.browser(), f.srv.URL+"/dashboard/forgot")
	require.Contains(t, page, "Email is not set up on this server")
	require.NotContains(t, page, `name="email"`, "no form")
	res, page := post(t, f.browser(), f.srv.URL+"/dashboard/forgot", url.Values{"email": {f.a.Email}})
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Contains(t, page, "Email is not set up on this server")
	require.NotContains(t, page, resetAnswer)
}
