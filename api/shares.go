package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/preview"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// Shared emails, as Resend's POST /emails/{id}/share makes them: a link
// to a public, read-only view of one sent email that anyone holding it may
// open until it expires. The link carries a token signed (HMAC-SHA256,
// under a key derived from the master key) for the team's one email and
// an expiry, like Resend's; nothing is stored, so the view ends when the
// token expires or the email is gone (erased, or purged by retention).
// The view is served as the dashboard's preview is: the email's HTML in a
// sandboxed frame that runs no script and loads nothing remote until the
// viewer asks (preview.Headers). It is the HTML as accepted, before open
// and click tracking were added at delivery, so viewing it records no
// `opened` and its links lead where the sender wrote them. The token
// travels in the query, which the request log does not record, and the
// log redacts it in the response that hands it out (reqlog).

// ShareKeyPurpose derives the key of share tokens from the master key.
const ShareKeyPurpose = "posthaste email shares v1"

// SharePath is the public view of a shared email; SharePath+"/content"
// is its sandboxed frame.
const SharePath = "/shared"

// shareTokenLen is the length of a token's signed part: team, email,
// expiry (Unix seconds).
const shareTokenLen = 16 + 16 + 8

func (s *Server) shareKey() []byte {
	if s.box == nil {
		return nil
	}
	return s.box.DeriveKey(ShareKeyPurpose)
}

func shareMAC(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// shareToken signs the team's email until exp.
func shareToken(key []byte, team, email uuid.UUID, exp time.Time) string {
	msg := make([]byte, 0, shareTokenLen+sha256.Size)
	msg = append(msg, team[:]...)
	msg = append(msg, email[:]...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(exp.Unix()))
	return base64.RawURLEncoding.EncodeToString(append(msg, shareMAC(key, msg)...))
}

// openShareToken returns the team and email a token was signed for; ok
// is false for a token that is malformed, altered or expired.
func openShareToken(key []byte, token string, now time.Time) (team, email uuid.UUID, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if key == nil || err != nil || len(b) != shareTokenLen+sha256.Size {
		return uuid.Nil, uuid.Nil, false
	}
	msg, mac := b[:shareTokenLen], b[shareTokenLen:]
	if !hmac.Equal(mac, shareMAC(key, msg)) {
		return uuid.Nil, uuid.Nil, false
	}
	if exp := int64(binary.BigEndian.Uint64(msg[32:])); now.Unix() >= exp {
		return uuid.Nil, uuid.Nil, false
	}
	copy(team[:], msg[:16])
	copy(email[:], msg[16:32])
	return team, email, true
}

type shareJSON struct {
	Object string `json:"object"`
	ID     string `json:"id"`
	URL    string `json:"url"`
}

// shareEmail answers POST /emails/{id}/share {"expires_in": "2 hours"}
// with Resend's body: object, id and url.
func (s *emailsAPI) shareEmail(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req struct {
		ExpiresIn *string `json:"expires_in"`
	}
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	ttl, err := submit.ShareExpiry(req.ExpiresIn)
	if err != nil {
		s.respondError(c, err)
		return
	}
	team := principal(c).TeamID
	if _, err := s.emails.Get(c.Request.Context(), team, id); err != nil {
		s.respondError(c, notFound(err, "Email not found."))
		return
	}
	key := s.shareKey()
	if key == nil {
		s.respondError(c, errorf(http.StatusInternalServerError, nameApplicationError,
			"Sharing is unavailable: the server has no master key (POSTHASTE_MASTER_KEY)."))
		return
	}
	token := shareToken(key, team, id, time.Now().Add(ttl))
	c.PureJSON(http.StatusOK, shareJSON{Object: "email", ID: id.String(),
		URL: s.baseURL(c) + SharePath + "?" + url.Values{"token": {token}}.Encode()})
}

// sharedEmail loads the email of the request's share token; it has
// answered the request (404, saying nothing of what exists) when ok is
// false.
func (s *emailsAPI) sharedEmail(c *gin.Context) (store.Email, bool) {
	team, id, ok := openShareToken(s.shareKey(), c.Query("token"), time.Now())
	if ok {
		e, err := s.emails.Get(c.Request.Context(), team, id)
		if err == nil {
			return e, true
		}
		if !errors.Is(err, store.ErrNotFound) {
			s.respondError(c, err)
			return store.Email{}, false
		}
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	c.Data(http.StatusNotFound, "text/html; charset=utf-8",
		[]byte(`<!doctype html><title>Link expired</title><p>This link is invalid or has expired.</p>`))
	return store.Email{}, false
}

// sharedPage is the public page of a shared email: its header and, in a
// sandboxed frame, its body.
var sharedPage = template.Must(template.New("shared").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>{{.Email.Subject}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:56rem;padding:1rem;color:#111}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:0 0 1rem}dt{color:#666}dd{margin:0}
iframe{width:100%;height:70vh;border:1px solid #ddd;border-radius:4px}
pre{white-space:pre-wrap;border:1px solid #ddd;border-radius:4px;padding:1rem}.note{color:#666;font-size:.9rem}
</style></head><body>
<h1>{{.Email.Subject}}</h1>
<dl>
<dt>From</dt><dd>{{.Email.From}}</dd>
<dt>To</dt><dd>{{range $i, $a := .Email.To}}{{if $i}}, {{end}}{{$a}}{{end}}</dd>
{{if .Email.Cc}}<dt>Cc</dt><dd>{{range $i, $a := .Email.Cc}}{{if $i}}, {{end}}{{$a}}{{end}}</dd>{{end}}
<dt>Date</dt><dd>{{.Date}}</dd>
</dl>
{{if .Email.HTML}}<p class="note">Remote images and stylesheets are not loaded: they would tell the sender you opened the email.
<a href="{{.Frame}}&amp;remote=1" target="email">Load remote content</a></p>
<iframe title="Email" name="email" sandbox src="{{.Frame}}"></iframe>
{{else}}<pre>{{with .Email.Text}}{{.}}{{else}}(This email has no body.){{end}}</pre>{{end}}
</body></html>
`))

// viewSharedEmail serves GET /shared?token=…: the page of the shared
// email. It runs no script; only its frame, of the same origin, loads.
func (s *emailsAPI) viewSharedEmail(c *gin.Context) {
	e, ok := s.sharedEmail(c)
	if !ok {
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-src 'self'; "+
		"frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Robots-Tag", "noindex, nofollow")
	h.Set("Content-Type", "text/html; charset=utf-8")
	c.Status(http.StatusOK)
	err := sharedPage.Execute(c.Writer, struct {
		Email store.Email
		Date  string
		Frame string
	}{e, e.CreatedAt.UTC().Format(time.RFC1123), SharePath + "/content?" + url.Values{"token": {c.Query("token")}}.Encode()})
	if err != nil {
		s.logger.Error("rendering a shared email", "email_id", e.ID, "err", err)
	}
}

// viewSharedContent serves GET /shared/content?token=…[&remote=1]: the
// shared email's HTML under the preview's sandbox.
func (s *emailsAPI) viewSharedContent(c *gin.Context) {
	e, ok := s.sharedEmail(c)
	if !ok {
		return
	}
	preview.Headers(c.Writer.Header(), c.Query("remote") == "1")
	c.Header("Cache-Control", "private, no-store")
	c.Header("X-Robots-Tag", "noindex, nofollow")
	html := "<p style=\"font-family:sans-serif;color:#666\">This email has no HTML part.</p>"
	if e.HTML != nil {
		html = *e.HTML
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(html))
}
