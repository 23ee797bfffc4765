package api_test

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// TestShareEmail: POST /emails/{id}/share answers Resend's body with a
// link to a public, read-only view of the email: its page and its HTML
// in a sandboxed frame that loads nothing remote until asked, the HTML as
// sent (no tracking), never recording an open; the link is the team's
// own email's only, refused when altered, and dead once the email is
// erased. Bad expires_in values are 422s.
func TestShareEmail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	html := `<p>Hi <a href="https://example.org/offer?x=1">offer</a> <img src="https://images.example.org/p.png"></p>`
	r := e.do("POST", "/emails", e.keyA, map[string]any{"from": "Acme <onboarding@posthaste.test>",
		"to": "delivered@posthaste.test", "subject": "Spring offer", "html": html})
	require.Equal(t, 200, r.status, string(r.raw))
	id := r.body["id"].(string)

	r = e.do("POST", "/emails/"+id+"/share", e.keyA, map[string]any{"expires_in": "2 hours"})
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, []string{"id", "object", "url"}, slices.Sorted(maps.Keys(r.body)))
	require.Equal(t, "email", r.body["object"])
	require.Equal(t, id, r.body["id"])
	link := r.body["url"].(string)
	require.True(t, strings.HasPrefix(link, e.srv.URL+"/shared?token="), link)

	// The page: the email's header fields and a sandboxed frame; it runs
	// no script and cannot be framed.
	res, body := fetch(t, link)
	require.Equal(t, 200, res.StatusCode, string(body))
	require.Contains(t, string(body), "Spring offer")
	require.Contains(t, string(body), "Acme &lt;onboarding@posthaste.test&gt;")
	require.Contains(t, string(body), "<iframe title=\"Email\" name=\"email\" sandbox src=\"/shared/content?token=")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.NotContains(t, res.Header.Get("Content-Security-Policy"), "script-src")
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))

	// The frame: the HTML as sent, links untouched, nothing remote.
	token := strings.TrimPrefix(link, e.srv.URL+"/shared?token=")
	res, body = fetch(t, e.srv.URL+"/shared/content?token="+token)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, html, string(body))
	csp := res.Header.Get("Content-Security-Policy")
	require.True(t, strings.HasPrefix(csp, "sandbox; default-src 'none'; img-src data:;"), csp)
	require.NotContains(t, csp, "https:")
	res, _ = fetch(t, e.srv.URL+"/shared/content?token="+token+"&remote=1")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "img-src data: https: http:")
	require.True(t, strings.HasPrefix(res.Header.Get("Content-Security-Policy"), "sandbox;"))

	// Viewing records nothing.
	evs, err := e.store.Emails.Events(ctx, uuid.MustParse(id))
	require.NoError(t, err)
	for _, ev := range evs {
		require.NotEqual(t, store.EventOpened, ev.Type)
		require.NotEqual(t, store.EventClicked, ev.Type)
	}
	require.Equal(t, "queued", e.do("GET", "/emails/"+id, e.keyA, nil).body["last_event"])

	// Defaults, bounds and bad input.
	r = e.do("POST", "/emails/"+id+"/share", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	for _, ok := range []string{"10m", "1 day", "48h", "1.5 hours", "90 SECONDS"} {
		r = e.do("POST", "/emails/"+id+"/share", e.keyA, map[string]any{"expires_in": ok})
		require.Equal(t, 200, r.status, ok+": "+string(r.raw))
	}
	for _, bad := range []any{"49h", "3 days", "30s", "0m", "forever", "10", "-1h", "", 3600, true} {
		r = e.do("POST", "/emails/"+id+"/share", e.keyA, map[string]any{"expires_in": bad})
		requireError(t, r, 422, "validation_error")
		require.Contains(t, r.body["message"], "expires_in")
	}
	requireError(t, e.do("POST", "/emails/"+id+"/share", e.keyA, "[1]"), 422, "validation_error")

	// Another team's email, an unknown one, a malformed id.
	requireError(t, e.do("POST", "/emails/"+id+"/share", e.keyB, nil), 404, "not_found")
	requireError(t, e.do("POST", "/emails/"+uuid.NewString()+"/share", e.keyA, nil), 404, "not_found")
	requireError(t, e.do("POST", "/emails/nope/share", e.keyA, nil), 422, "invalid_parameter")
	require.Equal(t, 401, e.do("POST", "/emails/"+id+"/share", "", nil).status)

	// An altered or missing token is a 404 that says nothing more.
	raw, err := url.QueryUnescape(token)
	require.NoError(t, err)
	flipped := []byte(raw)
	flipped[len(flipped)/2] ^= 1
	for _, bad := range []string{string(flipped), raw[:len(raw)-2], "", "x"} {
		for _, p := range []string{"/shared", "/shared/content"} {
			res, body := fetch(t, e.srv.URL+p+"?"+url.Values{"token": {bad}}.Encode())
			require.Equal(t, 404, res.StatusCode, p+"?token="+bad)
			require.NotContains(t, string(body), "Spring offer")
		}
	}

	// Once the email is erased, the link is dead.
	_, err = e.store.Privacy.EraseSubject(ctx, store.Subject{TeamID: e.teamA, Address: "delivered@posthaste.test"}, 0)
	require.NoError(t, err)
	for _, p := range []string{link, e.srv.URL + "/shared/content?token=" + token} {
		res, body := fetch(t, p)
		require.Equal(t, 404, res.StatusCode)
		require.NotContains(t, string(body), "Spring offer")
	}
}

// TestShareEmailOverSMTP: an email sent over SMTP is shared with the HTML
// body of its submitted message.
func TestShareEmailOverSMTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.sendSMTP(smtpWithAttachments("delivered@posthaste.test"), "delivered@posthaste.test")
	r := e.do("POST", "/emails/"+id+"/share", e.keyA, map[string]any{"expires_in": "5 minutes"})
	require.Equal(t, 200, r.status, string(r.raw))
	link := r.body["url"].(string)
	res, body := fetch(t, strings.Replace(link, "/shared?", "/shared/content?", 1))
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, string(body), `<a href="https://example.org/receipt">receipt</a>`)
	res, body = fetch(t, link)
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, string(body), "SMTP receipt")
}

// TestRequestLogRedactsShareAndSentAttachmentURLs: the share link and
// the signed download URLs of sent emails' attachments are as good as a
// key until they expire: the request log keeps neither the token nor the
// signatures, in the bodies that hand them out or the paths that use them.
func TestRequestLogRedactsShareAndSentAttachmentURLs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.do("POST", "/emails", e.keyA, map[string]any{"from": "Acme <onboarding@posthaste.test>",
		"to": "delivered@posthaste.test", "subject": "Hi", "html": "<p>Hi</p>",
		"attachments": []map[string]any{{"filename": "a.txt", "content": "aGk="}}})
	require.Equal(t, 200, r.status, string(r.raw))
	id := r.body["id"].(string)

	var secrets []string
	r = e.do("POST", "/emails/"+id+"/share", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	link, err := url.Parse(r.body["url"].(string))
	require.NoError(t, err)
	secrets = append(secrets, link.Query().Get("token"))
	e.do("GET", link.Path+"?"+link.RawQuery, e.keyA, nil)
	e.do("GET", "/shared/content?"+link.RawQuery, e.keyA, nil)

	r = e.do("GET", "/emails/"+id+"/attachments", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	a := r.body["data"].([]any)[0].(map[string]any)
	r = e.do("GET", "/emails/"+id+"/attachments/"+a["id"].(string), e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	for _, raw := range []string{a["download_url"].(string), r.body["download_url"].(string)} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		secrets = append(secrets, u.Query().Get("signature"))
		e.do("GET", u.Path+"?"+u.RawQuery, e.keyA, nil)
	}
	for _, s := range secrets {
		require.NotEmpty(t, s)
	}

	require.NoError(t, e.logs.Close(ctx))
	logs, _, err := e.store.Insights.ListRequestLogs(ctx, e.teamA, store.LogFilter{}, store.Page{Limit: 100})
	require.NoError(t, err)
	var paths []string
	redacted := 0
	for _, l := range logs {
		full, err := e.store.Insights.GetRequestLog(ctx, e.teamA, l.ID)
		require.NoError(t, err)
		paths = append(paths, full.Path)
		logged := full.Path
		for _, b := range []*string{full.RequestBody, full.ResponseBody} {
			if b != nil {
				logged += *b
			}
		}
		for _, s := range secrets {
			require.NotContains(t, logged, s, full.Path)
		}
		if full.ResponseBody != nil {
			redacted += strings.Count(*full.ResponseBody, "token=[redacted]") +
				strings.Count(*full.ResponseBody, "signature=[redacted]")
		}
	}
	require.Equal(t, 3, redacted, "the share link and both download URLs are logged, redacted")
	for _, p := range []string{"/shared", "/shared/content", "/emails/" + id + "/attachments/" + a["id"].(string) + "/download"} {
		require.Contains(t, paths, p)
	}
}
