package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/store"
)

var newKeyRe = regexp.MustCompile(`<code class="token" id="new-key">(ph_[^<]+)</code>`)

func withSMTP(cfg *dashboard.Config) {
	cfg.SMTP = dashboard.SMTPSettings{STARTTLSPorts: []int{587, 2587}, TLSPorts: []int{465}, Username: "posthaste"}
}

// TestQuickStartForAnEmptyTeam: a team that has sent nothing sees the
// quick start instead of an empty list; it makes a sending key, shown
// once, and the examples carry it; the key sends; then the list returns.
func TestQuickStartForAnEmptyTeam(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSMTP)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)

	res, page := get(t, c, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "<title>Get started · Posthaste</title>")
	require.Contains(t, page, `action="/dashboard/getting-started/key"`)
	require.Contains(t, page, "curl -X POST "+publicURL+"/emails")
	require.Contains(t, page, "Bearer YOUR_API_KEY", "a placeholder until a key is made")
	require.Contains(t, page, "<dt>Host</dt><dd><code>mail.example.test</code></dd>", "the host of the public URL")
	require.Contains(t, page, "<dt>Ports (STARTTLS)</dt><dd>587, 2587</dd>")
	require.Contains(t, page, "<dt>Ports (TLS)</dt><dd>465</dd>")
	require.Contains(t, page, "<dt>Username</dt><dd><code>posthaste</code></dd>")
	require.NotContains(t, page, "<table", "no empty table")
	token := csrf(t, page)

	res, _ = post(t, c, f.srv.URL+"/dashboard/getting-started/key", url.Values{"name": {"x"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the CSRF token is required")
	res, page = post(t, c, f.srv.URL+"/dashboard/getting-started/key", url.Values{"csrf": {token},
		"name": {strings.Repeat("k", 51)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Give the key a name of 1 to 50 characters.")
	require.Contains(t, page, `value="`+strings.Repeat("k", 51)+`"`, "the name is kept")

	res, page = post(t, c, f.srv.URL+"/dashboard/getting-started/key", url.Values{"csrf": {token}, "name": {"First steps"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	m := newKeyRe.FindStringSubmatch(page)
	require.NotNil(t, m, "the key is shown")
	key := html.UnescapeString(m[1])
	require.Contains(t, page, "Bearer "+m[1], "the curl example carries the key")
	require.Contains(t, page, `<dt>Password</dt><dd><code class="value">`+m[1]+`</code>`)
	require.Contains(t, page, "shown this once")
	keys, _, err := f.store.Accounts.ListAPIKeys(ctx, teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	var made *store.APIKey
	for i := range keys {
		if keys[i].Name == "First steps" {
			made = &keys[i]
		}
	}
	require.NotNil(t, made)
	require.Equal(t, store.PermissionSendingAccess, made.Permission)
	require.True(t, strings.HasPrefix(key, made.Prefix))
	keysB, _, err := f.store.Accounts.ListAPIKeys(ctx, uuid.MustParse(f.b.TeamID), store.Page{Limit: 10})
	require.NoError(t, err)
	for _, k := range keysB {
		require.NotEqual(t, "First steps", k.Name, "the key is the session's team's")
	}
	_, page = get(t, c, f.srv.URL+"/dashboard/getting-started")
	require.NotContains(t, page, key, "shown once")

	// The key sends, as the example says.
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/emails", strings.NewReader(
		`{"from": "Acme <onboarding@posthaste.test>", "to": "delivered@posthaste.test", "subject": "Hello from Posthaste", "html": "<p>It works!</p>"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	sent, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	sent.Body.Close()
	require.Equal(t, http.StatusOK, sent.StatusCode)

	_, page = get(t, c, f.srv.URL+"/dashboard/emails")
	require.Contains(t, page, "Hello from Posthaste", "the list once the team has sent")
	require.NotContains(t, page, "Send your first email")
	res, page = get(t, c, f.srv.URL+"/dashboard/getting-started")
	require.Equal(t, http.StatusOK, res.StatusCode, "the quick start stays reachable")
	require.Contains(t, page, "Send your first email")
	_, page = get(t, c, f.srv.URL+"/dashboard/emails?status=bounced")
	require.Contains(t, page, "No emails match these filters.")

	// Team B still starts with the quick start: A's email is not B's.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, pb := get(t, cb, f.srv.URL+"/dashboard/emails")
	require.Contains(t, pb, "Send your first email")
	require.NotContains(t, pb, `<a href="/dashboard/emails/`, "no email of team A")
}

// TestQuickStartWithoutSMTP: without SMTP listeners the settings are left out.
func TestQuickStartWithoutSMTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/getting-started")
	require.Contains(t, page, "Send your first email")
	require.NotContains(t, page, "Or send over SMTP")
}

// TestEmptyStatesSayWhatToDo: every list that is empty says so and links
// to the action that fills it.
func TestEmptyStatesSayWhatToDo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	for path, want := range map[string]string{
		"/dashboard/domains":      `No domains yet.`,
		"/dashboard/webhooks":     `No endpoints yet.`,
		"/dashboard/logs":         `No API requests yet.`,
		"/dashboard/suppressions": `No suppressed addresses.`,
		"/dashboard/metrics":      `No emails sent in this range.`,
	} {
		res, page := get(t, c, f.srv.URL+path)
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, page, `<p class="empty">`+want, path)
	}
	// The team's only key revoked, the keys page says what to do.
	keys, _, err := f.store.Accounts.ListAPIKeys(context.Background(), uuid.MustParse(f.a.TeamID), store.Page{Limit: 10})
	require.NoError(t, err)
	_, page := get(t, c, f.srv.URL+"/dashboard/api-keys")
	for _, k := range keys {
		res, _ := post(t, c, f.srv.URL+"/dashboard/api-keys/"+k.ID.String()+"/revoke", url.Values{"csrf": {csrf(t, page)}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
	}
	_, page = get(t, c, f.srv.URL+"/dashboard/api-keys")
	require.Contains(t, page, `<p class="empty">No API keys yet.`)
}
