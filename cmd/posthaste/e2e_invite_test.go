package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// dashboardClient is a browser of the dashboard: cookies, redirects followed.
type dashboardClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newDashboardClient(t *testing.T, base string) dashboardClient {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return dashboardClient{t: t, base: base, c: &http.Client{Jar: jar}}
}

func (d dashboardClient) page(res *http.Response, err error) (int, string) {
	d.t.Helper()
	require.NoError(d.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(d.t, err)
	return res.StatusCode, string(b)
}

var formCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// submit opens the page at path and posts form to action with the page's
// CSRF token.
func (d dashboardClient) submit(path, action string, form url.Values) (int, string) {
	d.t.Helper()
	_, page := d.page(d.c.Get(d.base + path))
	m := formCSRF.FindStringSubmatch(page)
	require.NotNil(d.t, m, page)
	form.Set("csrf", m[1])
	return d.page(d.c.PostForm(d.base+action, form))
}

// TestDevInvitation invites a new member from the dashboard of `posthaste
// dev`: the invitation goes through Posthaste itself, from the sandbox
// sender (dev's default system sender), over SMTP to the invitee's MX,
// stays out of the team's email log, and its link makes the invitee a
// member.
func TestDevInvitation(t *testing.T) {
	dns, mx := memberMX(t)
	env := devEnv(t, pgtest.NewDatabase(t), dns, mx)
	dev := startDev(t, env)
	defer dev.stop(t)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])

	owner := newDashboardClient(t, dev.base)
	status, _ := owner.submit("/dashboard/login", "/dashboard/login",
		url.Values{"email": {creds.Email}, "password": {creds.Password}})
	require.Equal(t, 200, status)
	status, page := owner.submit("/dashboard/team", "/dashboard/team/invitations",
		url.Values{"email": {"invitee@member.test"}, "role": {"member"}})
	require.Equal(t, http.StatusCreated, status, page)
	require.Contains(t, page, "Invitation sent to invitee@member.test.")

	msgs := mx.WaitMessages(t, 1, 30*time.Second)
	require.Equal(t, []string{"invitee@member.test"}, msgs[0].To)
	mr, err := mail.CreateReader(bytes.NewReader(msgs[0].Data))
	require.NoError(t, err)
	from, err := mr.Header.AddressList("From")
	require.NoError(t, err)
	require.Equal(t, "onboarding@posthaste.test", from[0].Address)
	part, err := mr.NextPart()
	require.NoError(t, err)
	text, err := io.ReadAll(part.Body)
	require.NoError(t, err)
	link := regexp.MustCompile(regexp.QuoteMeta(dev.base) + `/dashboard/invite/[A-Za-z0-9_-]{43}`).Find(text)
	require.NotNil(t, link, "the link leads to this server:\n%s", text)

	// The link is a secret: the email is not in the team's log.
	api := apiClient{t: t, base: dev.base, key: creds.APIKey}
	status, list := api.do("GET", "/emails", nil)
	require.Equal(t, 200, status)
	require.Empty(t, list["data"], "the invitation was sent as Posthaste's system team")

	invitee := newDashboardClient(t, dev.base)
	status, page = invitee.submit(string(link[len(dev.base):]), string(link[len(dev.base):]), url.Values{
		"name": {"Invited Person"}, "password": {"a-long-password"}, "confirm": {"a-long-password"}})
	require.Equal(t, 200, status, page)
	require.Contains(t, page, "Invited Person")
	require.Contains(t, page, creds.Email, "on the team page of the owner's team")
	require.NotContains(t, page, "is not confirmed", "the emailed link proved the invitee's address")
}
