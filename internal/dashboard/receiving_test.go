package dashboard_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestReceivingPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	on := store.ReceivingEnabled
	d := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Name: "in.example.test", Region: "us-east-1",
		Status: store.DomainVerified, ReturnPath: "send", TLS: store.TLSOpportunistic, DKIMSelector: "posthaste",
		DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: []byte("sealed"), Receiving: on}
	require.NoError(t, f.store.Domains.CreateDomain(ctx, d))
	in := store.NewInbound(f.store, nil)
	rt := inroute.New(f.store.Received, f.store.Emails, nil, nil)
	r, err := rt.Route(ctx, "help@in.example.test")
	require.NoError(t, err)
	require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: "x@example.org",
		Recipients: []inmail.Recipient{{Address: "help@in.example.test", Route: r}}, ReceivedAt: time.Now(),
		Data: []byte("Subject: raw\r\nX-Raw: yes\r\n\r\nbody\r\n")}))
	ms, err := storetest.InboundMessages(ctx, f.store, teamA, 1)
	require.NoError(t, err)
	html := `<p>Hi <img src="cid:pic"> <script>alert(1)</script></p>`
	text := "plain words"
	e := store.ReceivedEmail{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, DomainID: d.ID, InboundID: ms[0].ID,
		From: "Eve <eve@example.org>", To: []string{"help@in.example.test"}, ReceivedFor: []string{"help@in.example.test"},
		Subject: "Broken <widget>", MessageID: "<w1@example.org>", Text: &text, HTML: &html,
		Headers: map[string]string{"x-mailer": "Tester"}, CreatedAt: time.Now(),
		Attachments: []store.ReceivedAttachment{
			{ID: uuid.Must(uuid.NewV7()), Filename: "evil.html", ContentType: "text/html", ContentDisposition: "attachment",
				Content: []byte("<script>alert(2)</script>")},
			{ID: uuid.Must(uuid.NewV7()), ContentType: "image/png", ContentDisposition: "inline", ContentID: "pic",
				Content: []byte("PNG")},
		}}
	_, _, err = f.store.Received.InsertReceivedEmail(ctx, e)
	require.NoError(t, err)

	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/receiving")
	require.Contains(t, page, "Broken &lt;widget&gt;", "subjects are escaped")
	require.Contains(t, page, `href="/dashboard/receiving/`+e.ID.String()+`"`)
	require.Contains(t, page, `href="/dashboard/receiving" aria-current="page"`)

	base := f.srv.URL + "/dashboard/receiving/" + e.ID.String()
	res, page := get(t, c, base)
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, page, "Eve &lt;eve@example.org&gt;")
	require.Contains(t, page, "plain words")
	require.Contains(t, page, "x-mailer")
	require.Contains(t, page, `sandbox src="/dashboard/receiving/`+e.ID.String()+`/preview"`)
	require.Contains(t, page, "evil.html")

	res, body := get(t, c, base+"/preview")
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "sandbox")
	require.Contains(t, body, `<img src="data:image/png;base64,UE5H">`, "inline images embedded")

	res, body = get(t, c, base+"/attachments/"+e.Attachments[0].ID.String())
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "<script>alert(2)</script>", body)
	require.Equal(t, "attachment; filename=evil.html", res.Header.Get("Content-Disposition"))
	require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "sandbox")

	res, body = get(t, c, base+"/raw")
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, body, "X-Raw: yes")

	// Team B sees none of it.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, page = get(t, cb, f.srv.URL+"/dashboard/receiving")
	require.NotContains(t, page, "Broken")
	for _, p := range []string{"", "/raw", "/preview", "/attachments/" + e.Attachments[0].ID.String()} {
		res, _ = get(t, cb, base+p)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
	}
}
