package api_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// receivedEmail stores a received email for the team's domain d as the
// inbound MX and ProcessInbound would: an inbound_message row, then its
// parsed form with two attachments (one inline image the HTML refers to).
func (e *env) receivedEmail(d string) store.ReceivedEmail {
	e.t.Helper()
	ctx := context.Background()
	in := store.NewInbound(e.store, nil)
	rt := inroute.New(e.store.Received, e.store.Emails, nil, nil)
	r, err := rt.Route(ctx, "support@"+d)
	require.NoError(e.t, err)
	require.NoError(e.t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: "ann@example.org",
		Recipients: []inmail.Recipient{{Address: "support@" + d, Route: r}}, ReceivedAt: time.Now(),
		Data: []byte("From: ann@example.org\r\nSubject: Hi\r\n\r\nraw body\r\n")}))
	ms, err := storetest.InboundMessages(ctx, e.store, r.TeamID, 1)
	require.NoError(e.t, err)
	text, html := "plain body", `<p>Hi <img src="cid:logo1"></p>`
	id := uuid.Must(uuid.NewV7())
	re := store.ReceivedEmail{ID: id, TeamID: r.TeamID, DomainID: r.DomainID, InboundID: ms[0].ID,
		From: "Ann <ann@example.org>", To: []string{"support@" + d}, Cc: []string{}, Bcc: []string{},
		ReplyTo: []string{}, ReceivedFor: []string{"support@" + d}, Subject: "Hi", MessageID: "<m1@example.org>",
		Text: &text, HTML: &html, Headers: map[string]string{"subject": "Hi"}, CreatedAt: time.Now(),
		Attachments: []store.ReceivedAttachment{
			{ID: uuid.Must(uuid.NewV7()), Filename: "invoice.pdf", ContentType: "application/pdf",
				ContentDisposition: "attachment", Content: []byte("%PDF-1.4\n")},
			{ID: uuid.Must(uuid.NewV7()), ContentType: "image/png", ContentDisposition: "inline", ContentID: "logo1",
				Content: []byte("PNG")},
		}}
	_, inserted, err := e.store.Received.InsertReceivedEmail(ctx, re)
	require.NoError(e.t, err)
	require.True(e.t, inserted)
	return re
}

// enableReceiving creates a verified domain of team A with receiving
// enabled through the API.
func (e *env) enableReceiving(name string) map[string]any {
	e.t.Helper()
	d := e.createDomain(e.keyA, map[string]any{"name": name})
	e.setStatus(d["id"].(string), store.DomainVerified)
	r := e.do("PATCH", "/domains/"+d["id"].(string), e.keyA, map[string]any{"capabilities": map[string]any{"receiving": "enabled"}})
	require.Equal(e.t, 200, r.status, string(r.raw))
	return d
}

func TestDomainReceivingCapability(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.createDomain(e.keyA, map[string]any{"name": "in.example.test"})
	id := d["id"].(string)
	require.Equal(t, map[string]any{"sending": "enabled", "receiving": "disabled"}, d["capabilities"])
	require.Len(t, d["records"], 4)

	for _, bad := range []map[string]any{{"receiving": "on"}, {"sending": "disabled"}} {
		r := e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"capabilities": bad})
		require.Equal(t, 422, r.status, string(r.raw))
		require.Equal(t, "validation_error", r.body["name"])
	}
	r := e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"capabilities": "x"})
	require.Equal(t, 422, r.status, string(r.raw))
	// Another team's domain is not found.
	r = e.do("PATCH", "/domains/"+id, e.keyB, map[string]any{"capabilities": map[string]any{"receiving": "enabled"}})
	require.Equal(t, 404, r.status, string(r.raw))

	r = e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"capabilities": map[string]any{"receiving": "enabled"}})
	require.Equal(t, 200, r.status, string(r.raw))
	got := e.do("GET", "/domains/"+id, e.keyA, nil).body
	require.Equal(t, map[string]any{"sending": "enabled", "receiving": "enabled"}, got["capabilities"])
	recs := got["records"].([]any)
	require.Len(t, recs, 5)
	require.Equal(t, map[string]any{"record": "Receiving", "type": "MX", "name": "@", "ttl": "Auto",
		"status": "not_started", "value": "bounce.posthaste.example", "priority": float64(10)}, recs[4])
	list := e.do("GET", "/domains", e.keyA, nil).body["data"].([]any)
	require.Equal(t, map[string]any{"sending": "enabled", "receiving": "enabled"}, list[0].(map[string]any)["capabilities"])

	// Created with receiving enabled; a bad capability creates nothing.
	c := e.createDomain(e.keyA, map[string]any{"name": "in2.example.test",
		"capabilities": map[string]any{"receiving": "enabled"}})
	require.Equal(t, "enabled", c["capabilities"].(map[string]any)["receiving"])
	require.Len(t, c["records"], 5)
	r = e.do("POST", "/domains", e.keyA, map[string]any{"name": "in3.example.test",
		"capabilities": map[string]any{"receiving": "yes"}})
	require.Equal(t, 422, r.status, string(r.raw))
	require.Len(t, e.do("GET", "/domains", e.keyA, nil).body["data"], 2)

	r = e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"capabilities": map[string]any{"receiving": "disabled"}})
	require.Equal(t, 200, r.status, string(r.raw))
	got = e.do("GET", "/domains/"+id, e.keyA, nil).body
	require.Equal(t, "disabled", got["capabilities"].(map[string]any)["receiving"])
	require.Len(t, got["records"], 4)
}

func fetch(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, b
}

// requireSignedDownload checks a signed download URL of invoice.pdf
// ("%PDF-1.4\n"): it downloads as an attachment, and it stops working when
// its signature, expiry or team is changed, its signature removed, it has
// expired, or it is moved from attachment id to attachment other.
func requireSignedDownload(t *testing.T, e *env, u, id, other string) {
	t.Helper()
	res, body := fetch(t, u)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "%PDF-1.4\n", string(body))
	require.Equal(t, "application/pdf", res.Header.Get("Content-Type"))
	require.Equal(t, "attachment; filename=invoice.pdf", res.Header.Get("Content-Disposition"))
	require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))

	pu, err := url.Parse(u)
	require.NoError(t, err)
	q := pu.Query()
	for name, change := range map[string]func(url.Values){
		"signature": func(v url.Values) { v.Set("signature", strings.Repeat("A", 43)) },
		"expires":   func(v url.Values) { v.Set("expires", "99999999999") },
		"expired":   func(v url.Values) { v.Set("expires", "1") },
		"team":      func(v url.Values) { v.Set("team", e.teamB.String()) },
		"none":      func(v url.Values) { v.Del("signature") },
	} {
		v := url.Values{}
		for k, vs := range q {
			v[k] = append([]string(nil), vs...)
		}
		change(v)
		res, _ := fetch(t, e.srv.URL+pu.Path+"?"+v.Encode())
		require.Equal(t, 404, res.StatusCode, name)
	}
	res, _ = fetch(t, e.srv.URL+strings.Replace(pu.Path, id, other, 1)+"?"+q.Encode())
	require.Equal(t, 404, res.StatusCode, "signed for another attachment")
}

func TestReceivedEmails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enableReceiving("in.example.test")
	re := e.receivedEmail("in.example.test")
	id := re.ID.String()

	r := e.do("GET", "/emails/receiving", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "list", r.body["object"])
	require.Equal(t, false, r.body["has_more"])
	data := r.body["data"].([]any)
	require.Len(t, data, 1)
	item := data[0].(map[string]any)
	require.Equal(t, id, item["id"])
	require.Equal(t, "Ann <ann@example.org>", item["from"])
	require.Equal(t, []any{"support@in.example.test"}, item["received_for"])
	require.NotContains(t, item, "html")
	require.NotContains(t, item, "object")
	require.Len(t, item["attachments"], 2)

	r = e.do("GET", "/emails/receiving/"+id, e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "email", r.body["object"])
	require.Equal(t, "plain body", r.body["text"])
	require.Equal(t, `<p>Hi <img src="data:image/png;base64,UE5H"></p>`, r.body["html"])
	require.Equal(t, map[string]any{"subject": "Hi"}, r.body["headers"])
	require.Equal(t, "<m1@example.org>", r.body["message_id"])
	require.Equal(t, map[string]any{"id": re.Attachments[0].ID.String(), "filename": "invoice.pdf", "size": float64(9),
		"content_type": "application/pdf", "content_id": nil, "content_disposition": "attachment"},
		r.body["attachments"].([]any)[0])
	raw := r.body["raw"].(map[string]any)
	res, body := fetch(t, raw["download_url"].(string))
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "From: ann@example.org\r\nSubject: Hi\r\n\r\nraw body\r\n", string(body))
	require.Equal(t, "message/rfc822", res.Header.Get("Content-Type"))

	r = e.do("GET", "/emails/receiving/"+id+"?html_format=cid", e.keyA, nil)
	require.Equal(t, `<p>Hi <img src="cid:logo1"></p>`, r.body["html"])
	r = e.do("GET", "/emails/receiving/"+id+"?html_format=png", e.keyA, nil)
	require.Equal(t, 422, r.status)

	// Attachments, with download URLs that work without a key.
	r = e.do("GET", "/emails/receiving/"+id+"/attachments", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	atts := r.body["data"].([]any)
	require.Len(t, atts, 2)
	a0 := atts[0].(map[string]any)
	require.Equal(t, "invoice.pdf", a0["filename"])
	require.Equal(t, "attachment", a0["content_disposition"])
	require.NotEmpty(t, a0["expires_at"])
	r = e.do("GET", "/emails/receiving/"+id+"/attachments/"+re.Attachments[1].ID.String(), e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "attachment", r.body["object"])
	require.Equal(t, "logo1", r.body["content_id"])
	require.Equal(t, "inline", r.body["content_disposition"])

	u := a0["download_url"].(string)
	require.True(t, strings.HasPrefix(u, e.srv.URL+"/emails/receiving/"+id+"/attachments/"), u)
	requireSignedDownload(t, e, u, re.Attachments[0].ID.String(), re.Attachments[1].ID.String())

	// Team B sees none of team A's received mail.
	r = e.do("GET", "/emails/receiving", e.keyB, nil)
	require.Equal(t, 200, r.status)
	require.Empty(t, r.body["data"])
	for _, p := range []string{"/emails/receiving/" + id, "/emails/receiving/" + id + "/attachments",
		"/emails/receiving/" + id + "/attachments/" + re.Attachments[0].ID.String()} {
		r = e.do("GET", p, e.keyB, nil)
		require.Equal(t, 404, r.status, p)
		require.Equal(t, "not_found", r.body["name"])
	}
	// Unknown and malformed ids.
	r = e.do("GET", "/emails/receiving/"+uuid.NewString(), e.keyA, nil)
	require.Equal(t, 404, r.status)
	r = e.do("GET", "/emails/receiving/nope", e.keyA, nil)
	require.Equal(t, 422, r.status)
	r = e.do("GET", "/emails/receiving/"+id+"/attachments/"+uuid.NewString(), e.keyA, nil)
	require.Equal(t, 404, r.status)
	// The API needs a key.
	r = e.do("GET", "/emails/receiving", "", nil)
	require.Equal(t, 401, r.status)
	// Sent emails are still served beside.
	r = e.do("GET", "/emails", e.keyA, nil)
	require.Equal(t, 200, r.status)
}

// TestResendNodeSDKReceiving runs testdata/resend-node/receiving.cjs, which
// drives domain capabilities and received emails with Resend's official
// Node SDK (6.x, installed by scripts/setup.sh with npm ci).
func TestResendNodeSDKReceiving(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.enableReceiving("sdk.example.test")
	re := e.receivedEmail("sdk.example.test")
	out := runResendNode(t, "receiving.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA,
		"DOMAIN_ID="+d["id"].(string), "DOMAIN_NAME=sdk.example.test", "EMAIL_ID="+re.ID.String())
	require.Contains(t, string(out), "ok")
}

// TestRequestLogRedactsDownloadURLs: the signed download URLs of a
// received email's raw message, of its attachments and of a data export
// are as good as a key until they expire, so the request log keeps none of
// their signatures: neither in the response bodies that hand them out nor
// in the logged path of a request that fetches them.
func TestRequestLogRedactsDownloadURLs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.enableReceiving("in.example.test")
	re := e.receivedEmail("in.example.test")
	id := re.ID.String()

	var urls []string
	r := e.do("GET", "/emails/receiving/"+id, e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	urls = append(urls, r.body["raw"].(map[string]any)["download_url"].(string))
	r = e.do("GET", "/emails/receiving/"+id+"/attachments", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	for _, a := range r.body["data"].([]any) {
		urls = append(urls, a.(map[string]any)["download_url"].(string))
	}
	r = e.do("GET", "/emails/receiving/"+id+"/attachments/"+re.Attachments[0].ID.String(), e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	urls = append(urls, r.body["download_url"].(string))

	r = e.do("POST", "/data-requests", e.keyA, map[string]any{"email": "dana@example.org", "type": "export"})
	require.Equal(t, 201, r.status, string(r.raw))
	dr := uuid.MustParse(r.body["id"].(string))
	expires := time.Now().Add(time.Hour)
	_, err := e.store.Privacy.FinishDataRequest(ctx, dr, store.DataRequestOutcome{ExpiresAt: &expires})
	require.NoError(t, err)
	r = e.do("GET", "/data-requests/"+dr.String(), e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	urls = append(urls, r.body["download_url"].(string))

	// Each kind, fetched (with the key too, so that the entry is the
	// team's to read).
	var signatures []string
	for _, u := range urls {
		p, err := url.Parse(u)
		require.NoError(t, err)
		sig := p.Query().Get("signature")
		require.NotEmpty(t, sig, u)
		signatures = append(signatures, sig)
		e.do("GET", strings.TrimPrefix(u, e.srv.URL), e.keyA, nil)
	}

	require.NoError(t, e.logs.Close(ctx))
	logs, _, err := e.store.Insights.ListRequestLogs(ctx, e.teamA, store.LogFilter{}, store.Page{Limit: 100})
	require.NoError(t, err)
	var redacted, fetched int
	for _, l := range logs {
		full, err := e.store.Insights.GetRequestLog(ctx, e.teamA, l.ID)
		require.NoError(t, err)
		logged := full.Path
		if full.RequestBody != nil {
			logged += *full.RequestBody
		}
		if full.ResponseBody != nil {
			logged += *full.ResponseBody
			redacted += strings.Count(*full.ResponseBody, "signature=[redacted]")
		}
		for _, sig := range signatures {
			require.NotContains(t, logged, sig, full.Path)
		}
		require.NotContains(t, full.Path, "?", "the path is logged without its query")
		if strings.HasSuffix(full.Path, "/raw") || strings.HasSuffix(full.Path, "/download") {
			fetched++
		}
	}
	require.Equal(t, len(urls), fetched, "every fetch is logged")
	require.Equal(t, len(urls), redacted, "every URL handed out is logged, its signature redacted")
}
