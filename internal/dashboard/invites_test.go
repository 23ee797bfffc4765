package dashboard_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
)

var inviteLinkRe = regexp.MustCompile(regexp.QuoteMeta(publicURL) + `(/dashboard/invite/[A-Za-z0-9_-]{43})\b`)

// inviteFrom signs the owner in, invites email with role and returns the
// path of the link in the email.
func (f *fixture) inviteFrom(c *http.Client, email, role string) string {
	t := f.t
	t.Helper()
	_, page := get(t, c, f.srv.URL+"/dashboard/team")
	before := len(f.mailer.mails())
	res, page := post(t, c, f.srv.URL+"/dashboard/team/invitations", url.Values{"csrf": {csrf(t, page)},
		"email": {email}, "role": {role}})
	require.Equal(t, http.StatusCreated, res.StatusCode, page)
	require.Contains(t, page, "Invitation sent to "+strings.ToLower(email))
	mails := f.mailer.mails()
	require.Len(t, mails, before+1)
	m := mails[len(mails)-1]
	require.Equal(t, strings.ToLower(email), m.To)
	require.Equal(t, "Join Team A on Posthaste", m.Subject)
	link := inviteLinkRe.FindStringSubmatch(m.Text)
	require.NotNil(t, link, m.Text)
	return link[1]
}

func (f *fixture) addMember(team, email, pw, role string) uuid.UUID {
	f.t.Helper()
	hash := passwordtest.Hash(f.t, pw)
	u := store.User{ID: uuid.New(), Email: email, PasswordHash: hash}
	require.NoError(f.t, f.store.Accounts.CreateUser(context.Background(), u))
	require.NoError(f.t, f.store.Accounts.AddMember(context.Background(), uuid.MustParse(team), u.ID, role))
	return u.ID
}

func sessionCookie(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == "posthaste_session" {
			return c
		}
	}
	return nil
}

func TestInviteANewUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)
	link := f.inviteFrom(oc, "New.Person@Example.com", "member")
	_, page := get(t, oc, f.srv.URL+"/dashboard/team")
	require.Regexp(t, `(?s)<table class="list invitations">.*new.person@example.com`, page, "the pending invitation is listed")

	// The link asks a new user for a name and a password.
	c := f.browser()
	res, page := get(t, c, f.srv.URL+link)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Join Team A")
	require.Contains(t, page, `for="password"`)
	require.Contains(t, page, `name="name"`)
	res, page = post(t, c, f.srv.URL+link, url.Values{"password": {"long-enough-pw"}, "confirm": {"long-enough-pw"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "CSRF token required")
	res, page = post(t, c, f.srv.URL+link, url.Values{"csrf": {csrf(t, page)}, "password": {"short"}, "confirm": {"short"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "at least 10 characters")
	res, _ = post(t, c, f.srv.URL+link, url.Values{"csrf": {csrf(t, page)}, "name": {"New Person"},
		"password": {"long-enough-pw"}, "confirm": {"long-enough-pw"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/team", res.Header.Get("Location"))
	require.NotNil(t, sessionCookie(res), "signed in")

	_, page = get(t, c, f.srv.URL+"/dashboard/team")
	require.Contains(t, page, "New Person")
	require.Contains(t, page, f.a.Email, "a member of team A")
	role, err := f.store.Sessions.MemberRole(context.Background(), uuid.MustParse(f.a.TeamID), mustUser(t, f, "new.person@example.com"))
	require.NoError(t, err)
	require.Equal(t, "member", role)

	// The link worked once; the invitation is gone from the list.
	res, page = get(t, f.browser(), f.srv.URL+link)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Contains(t, page, "This invitation link does not work")
	_, page = get(t, oc, f.srv.URL+"/dashboard/team")
	require.NotContains(t, page, `class="list invitations"`)

	res, _ = f.login(f.browser(), "new.person@example.com", "long-enough-pw")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the new password signs in")
}

func TestInviteAnExistingUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)
	link := f.inviteFrom(oc, f.b.Email, "owner")

	// Signed out, the page asks to sign in and comes back.
	c := f.browser()
	_, page := get(t, c, f.srv.URL+link)
	require.Contains(t, page, "Sign in to accept")
	require.NotContains(t, page, `name="password"`, "no new account for an existing address")
	_, lp := get(t, c, f.srv.URL+"/dashboard/login") // a valid form token
	res, _ := post(t, c, f.srv.URL+link, url.Values{"csrf": {csrf(t, lp)}, "password": {"long-enough-pw"}, "confirm": {"long-enough-pw"}})
	require.Equal(t, http.StatusConflict, res.StatusCode, "nobody sets a password for an existing user")
	res, _ = f.login(f.browser(), f.b.Email, "long-enough-pw")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	// Signed in as someone else, it cannot be accepted.
	res, page = get(t, oc, f.srv.URL+link)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "but this invitation is for "+f.b.Email)
	res, _ = post(t, oc, f.srv.URL+link+"/accept", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	_, page = get(t, c, f.srv.URL+"/dashboard/login?next="+url.QueryEscape(link))
	res, _ = post(t, c, f.srv.URL+"/dashboard/login", url.Values{"csrf": {csrf(t, page)}, "email": {f.b.Email},
		"password": {f.b.Password}, "next": {link}})
	require.Equal(t, link, res.Header.Get("Location"))
	_, page = get(t, c, f.srv.URL+link)
	require.Contains(t, page, "/accept")
	res, _ = post(t, c, f.srv.URL+link+"/accept", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = get(t, c, f.srv.URL+"/dashboard/team")
	require.Contains(t, page, f.a.Email, "the session moved to team A")
	require.Contains(t, page, "/dashboard/team/invitations", "as an owner")
	role, err := f.store.Sessions.MemberRole(context.Background(), uuid.MustParse(f.a.TeamID), mustUser(t, f, f.b.Email))
	require.NoError(t, err)
	require.Equal(t, "owner", role)

	res, _ = post(t, c, f.srv.URL+link+"/accept", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusNotFound, res.StatusCode, "single use")
}

func TestInvitationRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.addMember(f.a.TeamID, "member@example.com", "member-password", "member")

	// A member can neither invite nor revoke.
	mc := f.browser()
	f.login(mc, "member@example.com", "member-password")
	_, page := get(t, mc, f.srv.URL+"/dashboard/team")
	require.NotContains(t, page, "/dashboard/team/invitations")
	res, _ := post(t, mc, f.srv.URL+"/dashboard/team/invitations", url.Values{"csrf": {csrf(t, page)}, "email": {"x@example.com"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Empty(t, f.mailer.mails())

	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)
	_, page = get(t, oc, f.srv.URL+"/dashboard/team")
	token := csrf(t, page)
	res, _ = post(t, oc, f.srv.URL+"/dashboard/team/invitations", url.Values{"email": {"x@example.com"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "CSRF token required")
	res, _ = post(t, oc, f.srv.URL+"/dashboard/team/invitations", url.Values{"csrf": {token}, "email": {"not an address"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	res, _ = post(t, oc, f.srv.URL+"/dashboard/team/invitations", url.Values{"csrf": {token}, "email": {"Member@example.com"}})
	require.Equal(t, http.StatusConflict, res.StatusCode, "already a member")

	// Inviting again replaces the link.
	first := f.inviteFrom(oc, "x@example.com", "member")
	second := f.inviteFrom(oc, "x@example.com", "member")
	res, _ = get(t, f.browser(), f.srv.URL+first)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = get(t, f.browser(), f.srv.URL+second)
	require.Equal(t, http.StatusOK, res.StatusCode)
	invs, err := f.store.Accounts.Invitations(ctx, uuid.MustParse(f.a.TeamID))
	require.NoError(t, err)
	require.Len(t, invs, 1)
	revoke := f.srv.URL + "/dashboard/team/invitations/" + invs[0].ID.String() + "/revoke"

	res, _ = post(t, mc, revoke, url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "members cannot revoke")

	// Team B's owner cannot revoke team A's invitation.
	bc := f.browser()
	f.login(bc, f.b.Email, f.b.Password)
	_, pb := get(t, bc, f.srv.URL+"/dashboard/team")
	require.NotContains(t, pb, "x@example.com")
	res, _ = post(t, bc, revoke, url.Values{"csrf": {csrf(t, pb)}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = get(t, f.browser(), f.srv.URL+second)
	require.Equal(t, http.StatusOK, res.StatusCode, "still live")

	res, _ = post(t, oc, revoke, url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, page = get(t, f.browser(), f.srv.URL+second)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "revoked")
	require.Contains(t, page, "This invitation link does not work")

	// An expired link gets the same page; unknown ones too.
	sum := sha256.Sum256([]byte("expired-token"))
	_, err = f.store.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: uuid.MustParse(f.a.TeamID), Email: "late@example.com",
		Role: "member", ExpiresAt: time.Now().Add(-time.Minute)}, sum[:], nil)
	require.NoError(t, err)
	_, page = get(t, oc, f.srv.URL+"/dashboard/team")
	require.Regexp(t, `(?s)late@example.com.*badge bad">expired<`, page)
	for _, tok := range []string{"expired-token", "unknown-token"} {
		c := f.browser()
		res, page = get(t, c, f.srv.URL+"/dashboard/invite/"+tok)
		require.Equal(t, http.StatusNotFound, res.StatusCode, tok)
		require.Contains(t, page, "This invitation link does not work")
		res, _ = post(t, c, f.srv.URL+"/dashboard/invite/"+tok, url.Values{"password": {"long-enough-pw"}, "confirm": {"long-enough-pw"}})
		require.Equal(t, http.StatusNotFound, res.StatusCode, tok)
	}
	_, err = f.store.Accounts.UserByEmail(ctx, "late@example.com")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestInviteWithoutEmail(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		config func(*dashboard.Config)
		notice string
	}{
		{"no mailer", func(c *dashboard.Config) { c.Mailer = nil }, "Email is not set up on this server"},
		{"mailer fails", func(c *dashboard.Config) { c.Mailer = &fakeMailer{err: errors.New("quota")} }, "could not be sent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.config)
			oc := f.browser()
			f.login(oc, f.a.Email, f.a.Password)
			_, page := get(t, oc, f.srv.URL+"/dashboard/team")
			res, page := post(t, oc, f.srv.URL+"/dashboard/team/invitations", url.Values{"csrf": {csrf(t, page)}, "email": {"x@example.com"}})
			require.Equal(t, http.StatusCreated, res.StatusCode)
			require.Contains(t, page, tt.notice)
			m := regexp.MustCompile(`<code class="token" id="invite-link">` + inviteLinkRe.String()).FindStringSubmatch(page)
			require.NotNil(t, m, "the owner gets the link to pass on")
			res, _ = get(t, f.browser(), f.srv.URL+m[1])
			require.Equal(t, http.StatusOK, res.StatusCode)
		})
	}
}

// TestSwitchTeam: a member of two teams switches between them on the
// Account page; nobody switches into a team they are not a member of.
func TestSwitchTeam(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)
	_, page := get(t, oc, f.srv.URL+"/dashboard/account")
	require.NotContains(t, page, "Your teams", "a member of one team has nothing to switch to")
	link := f.inviteFrom(oc, f.b.Email, "member")

	c := f.browser()
	f.login(c, f.b.Email, f.b.Password)
	_, page = get(t, c, f.srv.URL+link)
	res, _ := post(t, c, f.srv.URL+link+"/accept", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)

	_, page = get(t, c, f.srv.URL+"/dashboard/account")
	require.Contains(t, page, "Your teams")
	require.Regexp(t, `Team A\s*<span class="muted">\(current\)</span>`, page)
	require.Contains(t, page, "Switch to Team B")
	token := csrf(t, page)

	res, _ = post(t, c, f.srv.URL+"/dashboard/account/team", url.Values{"team": {f.b.TeamID}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "CSRF token required")
	for _, team := range []string{uuid.NewString(), "nope", ""} {
		res, _ = post(t, c, f.srv.URL+"/dashboard/account/team", url.Values{"csrf": {token}, "team": {team}})
		require.Equal(t, http.StatusNotFound, res.StatusCode, "team %q", team)
	}
	_, page = get(t, c, f.srv.URL+"/dashboard/team")
	require.Contains(t, page, f.a.Email, "still in team A")

	res, _ = post(t, c, f.srv.URL+"/dashboard/account/team", url.Values{"csrf": {token}, "team": {f.b.TeamID}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/emails", res.Header.Get("Location"))
	_, page = get(t, c, f.srv.URL+"/dashboard/team")
	require.NotContains(t, page, f.a.Email, "now in team B, where A is not a member")
	_, page = get(t, c, f.srv.URL+"/dashboard/account")
	require.Regexp(t, `Team B\s*<span class="muted">\(current\)</span>`, page)

	// A owner cannot switch into team B, of which they are not a member.
	_, page = get(t, oc, f.srv.URL+"/dashboard/account")
	res, _ = post(t, oc, f.srv.URL+"/dashboard/account/team", url.Values{"csrf": {csrf(t, page)}, "team": {f.b.TeamID}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}
