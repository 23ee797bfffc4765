package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
)

// Tests of issue 14, point 5: invitation and password-reset emails are
// limited per team and per address, so they cannot drain the system
// sender's quota; the counts live in PostgreSQL, shared by every process.

var tightLimits = func(c *dashboard.Config) {
	c.MailLimits = dashboard.MailLimits{TeamInvitations: 3, PerAddress: 2}
}

// tryInvite posts an invitation from the signed-in owner on server base.
func tryInvite(t *testing.T, c *http.Client, base, email string) (*http.Response, string) {
	t.Helper()
	_, page := get(t, c, base+"/dashboard/team")
	return post(t, c, base+"/dashboard/team/invitations", url.Values{"csrf": {csrf(t, page)}, "email": {email}})
}

func TestInvitationEmailLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, tightLimits)
	ctx := context.Background()
	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)

	// Per address: a third email to x within the hour is refused, and the
	// earlier link keeps working.
	f.inviteFrom(oc, "x@example.com", "member")
	second := f.inviteFrom(oc, "x@example.com", "member")
	res, page := tryInvite(t, oc, f.srv.URL, "x@example.com")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Contains(t, page, "x@example.com has been sent too many emails by this server in the last hour")
	require.Len(t, f.mailer.mails(), 2)
	res, _ = get(t, f.browser(), f.srv.URL+second)
	require.Equal(t, http.StatusOK, res.StatusCode, "the refused invitation replaced nothing")

	// Per team: the third email is the team's last this hour.
	f.inviteFrom(oc, "y@example.com", "member")
	res, page = tryInvite(t, oc, f.srv.URL, "z@example.com")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Contains(t, page, "This team has sent 3 invitation emails in the last hour")
	require.Len(t, f.mailer.mails(), 3)
	invs, err := f.store.Accounts.Invitations(ctx, uuid.MustParse(f.a.TeamID))
	require.NoError(t, err)
	require.Len(t, invs, 2, "no invitation stored for z")

	// Another team has its own budget, but not another address budget.
	bc := f.browser()
	f.login(bc, f.b.Email, f.b.Password)
	res, _ = tryInvite(t, bc, f.srv.URL, "x@example.com")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "x got its two emails, whoever invites")
	res, _ = tryInvite(t, bc, f.srv.URL, "z@example.com")
	require.Equal(t, http.StatusCreated, res.StatusCode)

	// The counts are in PostgreSQL: another process (a second dashboard on
	// the same database) refuses team A too.
	cfg := dashboard.Config{Mailer: f.mailer, PublicURL: publicURL, Passwords: passwordtest.NewPool(),
		MailLimits: dashboard.MailLimits{TeamInvitations: 3, PerAddress: 2}}
	withServices(&cfg, f.store, serviceDeps{})
	dash, err := dashboard.New(cfg)
	require.NoError(t, err)
	other := httptest.NewServer(dash)
	t.Cleanup(other.Close)
	oc2 := f.browser()
	_, lp := get(t, oc2, other.URL+"/dashboard/login")
	res, _ = post(t, oc2, other.URL+"/dashboard/login", url.Values{"csrf": {csrf(t, lp)}, "email": {f.a.Email},
		"password": {f.a.Password}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, page = tryInvite(t, oc2, other.URL, "w@example.com")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, page)
	require.Len(t, f.mailer.mails(), 4)

	// Without a mailer nothing is sent, so nothing is limited: the owner
	// passes the links on.
	nf := newFixture(t, tightLimits, func(c *dashboard.Config) { c.Mailer = nil })
	nc := nf.browser()
	nf.login(nc, nf.a.Email, nf.a.Password)
	for range 4 {
		res, _ := tryInvite(t, nc, nf.srv.URL, "x@example.com")
		require.Equal(t, http.StatusCreated, res.StatusCode)
	}
}

func TestPasswordResetEmailLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *dashboard.Config) { c.MailLimits = dashboard.MailLimits{PerAddress: 1} })
	res, page := f.forgot(f.a.Email)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, resetAnswer)
	require.Len(t, f.mailer.mails(), 1)
	res, page = f.forgot(f.a.Email)
	require.Equal(t, http.StatusOK, res.StatusCode, "the same answer past the limit")
	require.Contains(t, page, resetAnswer)
	require.Len(t, f.mailer.mails(), 1, "but no second email")

	// Requests for an address without an account count as well, so the
	// limit tells an inviting owner nothing about which addresses have
	// accounts.
	f.forgot("nobody@example.com")
	require.Len(t, f.mailer.mails(), 1)
	bc := f.browser()
	f.login(bc, f.b.Email, f.b.Password)
	res, page = tryInvite(t, bc, f.srv.URL, "nobody@example.com")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, page)
	res, _ = tryInvite(t, bc, f.srv.URL, "somebody@example.com")
	require.Equal(t, http.StatusCreated, res.StatusCode)
}
