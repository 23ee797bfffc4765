package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/logtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestEmailPreviewLoadsNothingRemoteUntilAsked: the preview frame's policy
// blocks remote images, stylesheets and fonts (a tracking pixel would
// report the open) until the viewer follows "Load remote content", and
// never allows scripts.
func TestEmailPreviewLoadsNothingRemoteUntilAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	html := `<p style="color:red">Hi<img src="https://tracker.example/open.gif"></p>`
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: uuid.MustParse(f.a.TeamID), From: "onboarding@posthaste.test",
		FromDomain: "posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "Pixel",
		HTML: &html, LastEvent: store.EventQueued, CreatedAt: time.Now(),
		Recipients: []store.Recipient{{Address: "delivered@posthaste.test", Kind: "to", Domain: "posthaste.test", Status: "queued"}}}
	_, err := storetest.InsertEmail(context.Background(), f.store, e)
	require.NoError(t, err)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)

	preview := f.srv.URL + "/dashboard/emails/" + e.ID.String() + "/preview"
	res, body := get(t, c, preview)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, html, body)
	csp := directives(res.Header.Get("Content-Security-Policy"))
	require.Contains(t, csp, "sandbox", "no scripts, forms or plugins")
	require.Equal(t, "'none'", csp["default-src"])
	require.Equal(t, "data:", csp["img-src"], "no remote images")
	require.Equal(t, "'unsafe-inline'", csp["style-src"], "inline styles only")
	require.Equal(t, "data:", csp["font-src"])
	require.NotContains(t, csp, "script-src")
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))

	// The email page offers to load them into the frame.
	_, page := get(t, c, f.srv.URL+"/dashboard/emails/"+e.ID.String())
	require.Contains(t, page, `href="/dashboard/emails/`+e.ID.String()+`/preview?remote=1" target="email-preview"`)
	require.Contains(t, page, `name="email-preview" sandbox`)

	res, body = get(t, c, preview+"?remote=1")
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, html, body)
	csp = directives(res.Header.Get("Content-Security-Policy"))
	require.Contains(t, csp, "sandbox", "still no scripts")
	require.Equal(t, "'none'", csp["default-src"])
	require.Equal(t, "data: https: http:", csp["img-src"])
	require.Equal(t, "'unsafe-inline' https: http:", csp["style-src"])
	require.NotContains(t, csp, "script-src")
}

// directives splits a Content-Security-Policy into its directives.
func directives(policy string) map[string]string {
	out := map[string]string{}
	for _, d := range strings.Split(policy, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		if name != "" {
			out[name] = value
		}
	}
	return out
}

// TestTokensOfLinksStayOutOfTheLog: when an invitation or reset link's
// page fails, the log names the route, not the path with its token.
func TestTokensOfLinksStayOutOfTheLog(t *testing.T) {
	t.Parallel()
	out := &logtest.Buffer{}
	f := newFixture(t, func(c *dashboard.Config) { c.Logger = slog.New(slog.NewJSONHandler(out, nil)) })
	const token = "Zm9vYmFyLXNlY3JldC1saW5rLXRva2Vu"
	f.store.Close() // every lookup fails from here on
	for _, path := range []string{"/dashboard/invite/" + token, "/dashboard/reset/" + token} {
		res, err := f.srv.Client().Get(f.srv.URL + path)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, http.StatusInternalServerError, res.StatusCode, path)
	}
	logged := out.String()
	require.Contains(t, logged, "dashboard request failed")
	require.Contains(t, logged, `"route":"GET /dashboard/invite/{token}"`)
	require.Contains(t, logged, `"route":"GET /dashboard/reset/{token}"`)
	require.NotContains(t, logged, token)
}
