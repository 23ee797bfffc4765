package api_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// sendSMTP submits raw as the SMTP gateway does (submit.Service.SendMessage,
// the gateway's one call) for team A, and returns the email's id.
func (e *env) sendSMTP(raw string, rcpts ...string) string {
	e.t.Helper()
	svc := submit.New(submit.Config{Store: submit.StoreOf(e.store), Notifier: e.notify})
	res, err := svc.SendMessage(context.Background(), submit.Sender{TeamID: e.teamA}, submit.Message{
		EnvelopeFrom: "onboarding@posthaste.test", Recipients: rcpts,
		Data: []byte(strings.ReplaceAll(raw, "\n", "\r\n"))})
	require.NoError(e.t, err)
	return res.ID.String()
}

// smtpWithAttachments is a message as mail clients write it: a text and
// an HTML body, then two attachments, one of them base64.
func smtpWithAttachments(to string) string {
	return `From: Acme <onboarding@posthaste.test>
To: ` + to + `
Subject: SMTP receipt
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="inner"

--inner
Content-Type: text/plain; charset=utf-8

Hi
--inner
Content-Type: text/html; charset=utf-8

<p>Hi <a href="https://example.org/receipt">receipt</a></p>
--inner--
--outer
Content-Type: application/pdf; name="report.pdf"
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

` + base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 smtp\n")) + `
--outer
Content-Type: text/csv
Content-Disposition: attachment; filename="data.csv"

a,b
--outer--
`
}

// TestSentAttachments: the attachments of an email sent over the API and
// of one sent over SMTP are listed in Resend's shape, with download URLs
// that work without a key, for the team's own emails only, and are gone
// with the email once it is erased.
func TestSentAttachments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.do("POST", "/emails", e.keyA, map[string]any{
		"from": "Acme <onboarding@posthaste.test>", "to": "delivered@posthaste.test", "subject": "Receipt",
		"html": `<p>Thanks <img src="cid:logo"></p>`,
		"attachments": []map[string]any{
			{"filename": "invoice.pdf", "content": base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n"))},
			{"filename": "logo.png", "content": base64.StdEncoding.EncodeToString([]byte("PNG")), "content_id": "logo"},
		}})
	require.Equal(t, 200, r.status, string(r.raw))
	id := r.body["id"].(string)

	r = e.do("GET", "/emails/"+id+"/attachments", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "list", r.body["object"])
	require.Equal(t, false, r.body["has_more"])
	atts := r.body["data"].([]any)
	require.Len(t, atts, 2)
	a0, a1 := atts[0].(map[string]any), atts[1].(map[string]any)
	require.NoError(t, uuid.Validate(a0["id"].(string)))
	require.Equal(t, "invoice.pdf", a0["filename"])
	require.Equal(t, "application/pdf", a0["content_type"])
	require.Equal(t, "attachment", a0["content_disposition"])
	require.Equal(t, float64(9), a0["size"])
	require.NotContains(t, a0, "content_id")
	require.NotContains(t, a0, "object")
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, a0["expires_at"])
	require.Equal(t, "inline", a1["content_disposition"])
	require.Equal(t, "logo", a1["content_id"])
	require.Equal(t, "image/png", a1["content_type"])

	// The ids are stable: a second read names the same attachments.
	again := e.do("GET", "/emails/"+id+"/attachments", e.keyA, nil).body["data"].([]any)
	require.Equal(t, a0["id"], again[0].(map[string]any)["id"])

	// Pages, when asked for.
	r = e.do("GET", "/emails/"+id+"/attachments?limit=1", e.keyA, nil)
	require.Equal(t, true, r.body["has_more"])
	require.Len(t, r.body["data"], 1)
	r = e.do("GET", "/emails/"+id+"/attachments?limit=1&after="+a0["id"].(string), e.keyA, nil)
	require.Equal(t, false, r.body["has_more"])
	require.Equal(t, a1["id"], r.body["data"].([]any)[0].(map[string]any)["id"])
	requireError(t, e.do("GET", "/emails/"+id+"/attachments?limit=0", e.keyA, nil), 422, "validation_error")

	r = e.do("GET", "/emails/"+id+"/attachments/"+a0["id"].(string), e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "attachment", r.body["object"])
	require.Equal(t, "invoice.pdf", r.body["filename"])
	u := r.body["download_url"].(string)
	require.True(t, strings.HasPrefix(u, e.srv.URL+"/emails/"+id+"/attachments/"+a0["id"].(string)+"/download?"), u)
	requireSignedDownload(t, e, u, a0["id"].(string), a1["id"].(string))

	// Team B sees none of team A's attachments.
	for _, p := range []string{"/emails/" + id + "/attachments", "/emails/" + id + "/attachments/" + a0["id"].(string)} {
		requireError(t, e.do("GET", p, e.keyB, nil), 404, "not_found")
	}
	requireError(t, e.do("GET", "/emails/"+id+"/attachments/"+uuid.NewString(), e.keyA, nil), 404, "not_found")
	requireError(t, e.do("GET", "/emails/"+uuid.NewString()+"/attachments", e.keyA, nil), 404, "not_found")
	requireError(t, e.do("GET", "/emails/nope/attachments", e.keyA, nil), 422, "invalid_parameter")
	requireError(t, e.do("GET", "/emails/"+id+"/attachments/nope", e.keyA, nil), 422, "invalid_parameter")
	require.Equal(t, 401, e.do("GET", "/emails/"+id+"/attachments", "", nil).status)

	// Over SMTP: the attachments are parsed out of the submitted message.
	smtpID := e.sendSMTP(smtpWithAttachments("delivered@posthaste.test"), "delivered@posthaste.test")
	r = e.do("GET", "/emails/"+smtpID+"/attachments", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	satts := r.body["data"].([]any)
	require.Len(t, satts, 2)
	s0 := satts[0].(map[string]any)
	require.Equal(t, "report.pdf", s0["filename"])
	require.Equal(t, "application/pdf", s0["content_type"])
	require.Equal(t, "attachment", s0["content_disposition"])
	require.Equal(t, float64(14), s0["size"])
	require.Equal(t, "data.csv", satts[1].(map[string]any)["filename"])
	r = e.do("GET", "/emails/"+smtpID+"/attachments/"+s0["id"].(string), e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	res, body := fetch(t, r.body["download_url"].(string))
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "%PDF-1.4 smtp\n", string(body))
	requireError(t, e.do("GET", "/emails/"+smtpID+"/attachments", e.keyB, nil), 404, "not_found")

	// An SMTP email to two people, one of whom is then erased, keeps its
	// row (anonymised) but not the message that named them.
	shared := e.sendSMTP(smtpWithAttachments("delivered@posthaste.test, bounced@posthaste.test"),
		"delivered@posthaste.test", "bounced@posthaste.test")
	r = e.do("GET", "/emails/"+shared+"/attachments", e.keyA, nil)
	require.Len(t, r.body["data"], 2)
	sharedURL := r.body["data"].([]any)[0].(map[string]any)["download_url"].(string)

	// Erasing the recipient erases the emails only to them whole, and
	// anonymises the one to both: no attachments, no downloads.
	_, err := e.store.Privacy.EraseSubject(ctx, store.Subject{TeamID: e.teamA, Address: "delivered@posthaste.test"}, 0)
	require.NoError(t, err)
	for _, gone := range []string{id, smtpID} {
		requireError(t, e.do("GET", "/emails/"+gone+"/attachments", e.keyA, nil), 404, "not_found")
	}
	r = e.do("GET", "/emails/"+shared+"/attachments", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Empty(t, r.body["data"])
	for _, dead := range []string{u, sharedURL} {
		res, _ = fetch(t, dead)
		require.Equal(t, 404, res.StatusCode)
	}
}

// TestResendNodeSDKSentEmails runs testdata/resend-node/sent.cjs: the
// attachments and the sharing of sent emails through Resend's official
// Node SDK, unchanged.
func TestResendNodeSDKSentEmails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "sent.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	require.Contains(t, string(out), "ok")
}
