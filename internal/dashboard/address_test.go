package dashboard_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/seal"
)

// Tests of issue 14, point 2: an account is bound to an address only once
// the address is proven, and OAuth never enters an account whose password
// was set through an unproven link (account pre-hijacking).

func runMockOIDC(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// providers configures Google (mockoidc) and GitHub (fakeGitHub), with sign-up.
func providers(m *mockoidc.MockOIDC, gh *fakeGitHub) func() dashboard.OAuth {
	return func() dashboard.OAuth {
		mc := m.Config()
		o := dashboard.OAuth{Signup: true,
			Google: dashboard.Provider{ClientID: mc.ClientID, ClientSecret: mc.ClientSecret, Issuer: m.Issuer()}}
		if gh != nil {
			o.GitHub = dashboard.Provider{ClientID: "gh-client", ClientSecret: "gh-secret", URL: gh.srv.URL, APIURL: gh.srv.URL}
		}
		return o
	}
}

// followPage is follow that also returns the callback's page.
func followPage(t *testing.T, c *http.Client, start string) (*http.Response, string) {
	t.Helper()
	res, _ := get(t, c, start)
	require.Equal(t, http.StatusFound, res.StatusCode)
	res, _ = get(t, c, res.Header.Get("Location"))
	require.Equal(t, http.StatusFound, res.StatusCode, "provider authorize")
	return get(t, c, res.Header.Get("Location"))
}

// google signs c in (or confirms, with query "?confirm=1") through the
// mock Google as a user with a verified email.
func (f *fixture) google(m *mockoidc.MockOIDC, c *http.Client, email, query string) (*http.Response, string) {
	f.t.Helper()
	m.QueueUser(&mockoidc.MockUser{Subject: "sub-" + email, Email: email, EmailVerified: true})
	return followPage(f.t, c, f.srv.URL+"/dashboard/oauth/google/start"+query)
}

// inviteShown has the signed-in owner invite email on a server without
// (working) email and returns the path of the link the Team page shows.
func (f *fixture) inviteShown(owner *http.Client, email string) string {
	t := f.t
	t.Helper()
	_, page := get(t, owner, f.srv.URL+"/dashboard/team")
	res, page := post(t, owner, f.srv.URL+"/dashboard/team/invitations", url.Values{"csrf": {csrf(t, page)}, "email": {email}})
	require.Equal(t, http.StatusCreated, res.StatusCode, page)
	m := regexp.MustCompile(`<code class="token" id="invite-link">` + regexp.QuoteMeta(f.srv.URL) +
		`(/dashboard/invite/[A-Za-z0-9_-]{43})</code>`).FindStringSubmatch(page)
	require.NotNil(t, m, page)
	require.Contains(t, page, "an account created with it has an unconfirmed address")
	return m[1]
}

// join opens an invitation link as a new user and chooses pw.
func (f *fixture) join(c *http.Client, link, pw string) *http.Response {
	t := f.t
	t.Helper()
	_, page := get(t, c, f.srv.URL+link)
	res, _ := post(t, c, f.srv.URL+link, url.Values{"csrf": {csrf(t, page)}, "password": {pw}, "confirm": {pw}})
	return res
}

func (f *fixture) verified(email string) bool {
	f.t.Helper()
	u, err := f.store.Accounts.UserByEmail(context.Background(), email)
	require.NoError(f.t, err)
	return u.EmailVerifiedAt != nil
}

// signedOut checks that c reaches no dashboard page.
func (f *fixture) signedOut(c *http.Client, msg string) {
	f.t.Helper()
	res, _ := get(f.t, c, f.srv.URL+"/dashboard/emails")
	require.Equal(f.t, http.StatusSeeOther, res.StatusCode, msg)
	require.Contains(f.t, res.Header.Get("Location"), "/dashboard/login", msg)
}

// TestOAuthNeverEntersAnUnprovenAccount is the scenario: without a
// system mailer an owner sees the invitation link, opens it and sets a
// password for an address they do not control; the real owner of the
// address signing in with Google or GitHub must not land in that account.
func TestOAuthNeverEntersAnUnprovenAccount(t *testing.T) {
	t.Parallel()
	m, gh := runMockOIDC(t), newFakeGitHub(t)
	f := oauthFixture(t, providers(m, gh))
	require.True(t, f.verified(f.a.Email), "the operator-created owner's address counts as proven")

	owner := f.browser()
	f.login(owner, f.a.Email, f.a.Password)
	link := f.inviteShown(owner, "victim@example.com")
	attacker := f.browser()
	require.Equal(t, http.StatusSeeOther, f.join(attacker, link, "attacker-password").StatusCode)
	require.False(t, f.verified("victim@example.com"), "a shown link proves nothing")

	victim := f.browser()
	res, page := f.google(m, victim, "Victim@Example.com", "")
	require.Equal(t, http.StatusForbidden, res.StatusCode, page)
	require.Contains(t, page, "its address is not confirmed and Google cannot sign into it")
	require.Nil(t, sessionCookie(res), "no session for the provider's user")
	f.signedOut(victim, "Google did not sign the victim into the attacker's account")

	gh.emails = []map[string]any{{"email": "victim@example.com", "primary": true, "verified": true}}
	res, page = followPage(t, victim, f.srv.URL+"/dashboard/oauth/github/start")
	require.Equal(t, http.StatusForbidden, res.StatusCode, page)
	require.Contains(t, page, "GitHub cannot sign into it")
	f.signedOut(victim, "GitHub did not sign the victim into the attacker's account")

	// A session signed in with the password cannot use a sign-in either.
	res, _ = f.google(m, attacker, "victim@example.com", "")
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.False(t, f.verified("victim@example.com"))
}

// TestConfirmAddressWithProvider: someone who joined through a passed-on
// link proves their address by confirming it with a provider while signed
// in with the password; then the provider signs them in.
func TestConfirmAddressWithProvider(t *testing.T) {
	t.Parallel()
	m := runMockOIDC(t)
	f := oauthFixture(t, providers(m, nil))
	owner := f.browser()
	f.login(owner, f.a.Email, f.a.Password)
	_, page := get(t, owner, f.srv.URL+"/dashboard/team")
	require.NotContains(t, page, "is not confirmed", "a proven address has nothing to confirm")
	link := f.inviteShown(owner, "colleague@example.com")
	_, page = get(t, owner, f.srv.URL+"/dashboard/team")
	require.Regexp(t, `(?s)colleague@example.com.*link passed on`, page, "the owner sees the link was not emailed")

	c := f.browser()
	_, page = get(t, c, f.srv.URL+link)
	require.Contains(t, page, "the new account's address stays unconfirmed")
	require.Equal(t, http.StatusSeeOther, f.join(c, link, "colleague-password").StatusCode)
	_, page = get(t, c, f.srv.URL+"/dashboard/team")
	require.Contains(t, page, "Your address <strong>colleague@example.com</strong> is not confirmed")
	require.Contains(t, page, `href="/dashboard/oauth/google/start?confirm=1">Confirm with Google<`)
	require.NotContains(t, page, "Email me a confirmation link", "no mailer")

	// Confirming needs a session; a provider vouching for another address
	// confirms nothing.
	res, page := f.google(m, f.browser(), "colleague@example.com", "?confirm=1")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, page)
	require.Contains(t, page, "Sign in first")
	res, page = f.google(m, c, "someone.else@example.com", "?confirm=1")
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, page, "Google vouched for someone.else@example.com, not for colleague@example.com")
	require.False(t, f.verified("colleague@example.com"))

	res, page = f.google(m, c, "colleague@example.com", "?confirm=1")
	require.Equal(t, http.StatusOK, res.StatusCode, page)
	require.Contains(t, page, "Your address is confirmed")
	require.NotContains(t, page, "is not confirmed")
	require.True(t, f.verified("colleague@example.com"))

	c2 := f.browser()
	res, _ = f.google(m, c2, "colleague@example.com", "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = get(t, c2, f.srv.URL+"/dashboard/team")
	require.Contains(t, page, `title="Team A"`, "signed into the colleague's account")
}

// TestEmailedInvitationProvesAddress: whoever uses an emailed invitation
// link controls the address, so the account is bound to it and a provider
// sign-in enters it.
func TestEmailedInvitationProvesAddress(t *testing.T) {
	t.Parallel()
	m := runMockOIDC(t)
	f := oauthFixture(t, providers(m, nil), func(c *dashboard.Config) { c.Mailer = &fakeMailer{} })
	linkRe := regexp.MustCompile(regexp.QuoteMeta(f.srv.URL) + `(/dashboard/invite/[A-Za-z0-9_-]{43})\b`)
	owner := f.browser()
	f.login(owner, f.a.Email, f.a.Password)
	_, page := get(t, owner, f.srv.URL+"/dashboard/team")
	res, page := post(t, owner, f.srv.URL+"/dashboard/team/invitations", url.Values{"csrf": {csrf(t, page)},
		"email": {"new@example.com"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.NotContains(t, page, `id="invite-link"`, "the owner does not see an emailed link")
	require.NotContains(t, page, "link passed on")
	mails := f.mailer.mails()
	require.Len(t, mails, 1)
	link := linkRe.FindStringSubmatch(mails[0].Text)
	require.NotNil(t, link)

	_, page = get(t, f.browser(), f.srv.URL+link[1])
	require.NotContains(t, page, "stays unconfirmed")
	require.Equal(t, http.StatusSeeOther, f.join(f.browser(), link[1], "new-user-password").StatusCode)
	require.True(t, f.verified("new@example.com"))
	res, _ = f.google(m, f.browser(), "new@example.com", "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "Google signs into the proven account")
}

// TestPasswordResetTakesOverUnprovenAccount: when the invitation email
// could not be sent, the owner passed the link on and someone set a
// password and a second factor. The address's real owner, refused by
// Google, takes the account over with an emailed reset link: that proves
// the address, replaces the password, ends every session and removes the
// second factor the other person set.
func TestPasswordResetTakesOverUnprovenAccount(t *testing.T) {
	t.Parallel()
	m := runMockOIDC(t)
	box, err := seal.New(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	f := oauthFixture(t, providers(m, nil), func(c *dashboard.Config) {
		c.Mailer = &fakeMailer{err: errors.New("quota")}
		c.Keys = box
	})
	owner := f.browser()
	f.login(owner, f.a.Email, f.a.Password)
	link := f.inviteShown(owner, "victim@example.com")
	f.mailer.mu.Lock()
	f.mailer.err = nil
	f.mailer.mu.Unlock()
	attacker := f.browser()
	require.Equal(t, http.StatusSeeOther, f.join(attacker, link, "attacker-password").StatusCode)
	f.enroll(attacker)

	res, page := f.google(m, f.browser(), "victim@example.com", "")
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Contains(t, page, "Forgot password?")

	f.forgot("victim@example.com")
	mails := f.mailer.mails()
	require.Len(t, mails, 1)
	require.Equal(t, "victim@example.com", mails[0].To)
	require.Contains(t, mails[0].Text, "turns two-factor authentication off")
	reset := regexp.MustCompile(regexp.QuoteMeta(f.srv.URL) + `(/dashboard/reset/[A-Za-z0-9_-]{43})\b`).FindStringSubmatch(mails[0].Text)
	require.NotNil(t, reset)
	victim := f.browser()
	_, page = get(t, victim, f.srv.URL+reset[1])
	res, page = post(t, victim, f.srv.URL+reset[1], url.Values{"csrf": {csrf(t, page)}, "password": {"victims-own-password"},
		"confirm": {"victims-own-password"}})
	require.Equal(t, http.StatusOK, res.StatusCode, page)
	require.Contains(t, page, "two-factor authentication was turned off as well")
	require.True(t, f.verified("victim@example.com"))

	f.signedOut(attacker, "the attacker's session ended")
	res, _ = f.login(f.browser(), "victim@example.com", "attacker-password")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "the attacker's password is gone")
	res, _ = f.login(victim, "victim@example.com", "victims-own-password")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/emails", res.Header.Get("Location"), "no second factor from the attacker")
	res, _ = f.google(m, f.browser(), "victim@example.com", "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "Google now signs into the proven account")
}

// TestConfirmAddressByEmail: a user with an unproven address asks for a
// confirmation link on the Team page; using it proves the address.
func TestConfirmAddressByEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.addMember(f.a.TeamID, "member@example.com", "member-password", "member") // created unproven
	c := f.browser()
	f.login(c, "member@example.com", "member-password")
	_, page := get(t, c, f.srv.URL+"/dashboard/team")
	require.Contains(t, page, "is not confirmed")
	require.NotContains(t, page, "Confirm with", "no provider is configured")
	res, _ := post(t, c, f.srv.URL+"/dashboard/team/confirm-address", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "CSRF token required")
	res, page = post(t, c, f.srv.URL+"/dashboard/team/confirm-address", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusOK, res.StatusCode, page)
	require.Contains(t, page, "We emailed member@example.com a link")
	mails := f.mailer.mails()
	require.Len(t, mails, 1)
	require.Equal(t, "Confirm your address on Posthaste", mails[0].Subject)
	link := resetLinkRe.FindStringSubmatch(mails[0].Text)
	require.NotNil(t, link)

	rc := f.browser()
	_, page = get(t, rc, f.srv.URL+link[1])
	res, page = post(t, rc, f.srv.URL+link[1], url.Values{"csrf": {csrf(t, page)}, "password": {"member-new-password"},
		"confirm": {"member-new-password"}})
	require.Equal(t, http.StatusOK, res.StatusCode, page)
	require.Contains(t, page, "Your address is now confirmed")
	require.True(t, f.verified("member@example.com"))

	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)
	_, page = get(t, oc, f.srv.URL+"/dashboard/team")
	require.NotContains(t, page, "is not confirmed")
	res, page = post(t, oc, f.srv.URL+"/dashboard/team/confirm-address", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "already confirmed")
	require.Len(t, f.mailer.mails(), 1, "nothing sent for a proven address")
}
