package delivery_test

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/tracking"
	"github.com/posthaste/posthaste/workflows/contract"
)

var trackedLink = regexp.MustCompile(`https://links\.shop\.test/([co])/([A-Za-z0-9_-]+)`)

// TestDeliverTrackedEmail: mail from a domain with tracking on is built,
// tracked and signed per recipient once its Tracking record is verified,
// and delivered as stored before; the stored copy is never rewritten and
// the unsubscribe links are not tracked.
func TestDeliverTrackedEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, key := insertDomain(t, st, box, "shop.test")
	on := true
	require.NoError(t, st.Domains.UpdateDomain(ctx, d.TeamID, d.ID, store.DomainUpdate{OpenTracking: &on, ClickTracking: &on}, audit.Entry{}))
	html := `<html><body><p>Sale: <a href="https://shop.example/sale">go</a> ` +
		`<a href="` + unsubBase + `/unsubscribe/abc">unsubscribe</a></p></body></html>`
	send := func(source []byte) store.Email {
		rcpts := []string{"a@dest.test", "b@dest.test"}
		e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID,
			From: "Shop <hello@shop.test>", FromDomain: "shop.test", To: rcpts, Subject: "Sale", HTML: &html,
			LastEvent: store.EventQueued, CreatedAt: time.Now(), Source: source}
		if source == nil {
			e.Attachments = []store.Attachment{{Filename: "price-list.txt", ContentType: "text/plain",
				Content: []byte("prices")}}
		}
		for _, r := range rcpts {
			e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: "dest.test",
				Status: store.EventQueued})
		}
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		return e
	}
	mx, client := destMX(t, smtptest.Options{})
	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box, Unsubscribe: testLinks(t)},
		st, client, nil, nil)
	deliver := func(e store.Email) {
		res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare,
			contract.PrepareInput{EmailID: e.ID.String()})
		require.NoError(t, err)
		require.Len(t, res.Groups, 1)
		_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, contract.DeliverInput{EmailID: e.ID.String(),
			Domain: "dest.test", TLS: "opportunistic", Recipients: res.Groups[0].Recipients,
			ReturnPath: res.Groups[0].ReturnPath})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"a@dest.test": "delivered", "b@dest.test": "delivered"},
			recipientStatus(t, st, e))
		stored, err := st.Emails.Message(ctx, e.ID)
		require.NoError(t, err)
		require.NotContains(t, string(stored), "links.shop.test", "the stored copy is not rewritten")
	}

	// The Tracking record is not verified: untracked (one transaction
	// per recipient, each from its own return path, all one message).
	deliver(send(nil))
	msgs := mx.Messages()
	require.Len(t, msgs, 2)
	require.Equal(t, msgs[0].Data, msgs[1].Data)
	require.NotContains(t, string(msgs[0].Data), "links.shop.test")
	require.Contains(t, string(msgs[0].Data), "price-list.txt")

	require.NoError(t, st.Domains.SetDomainStatus(ctx, d.ID, store.DomainVerified, map[string]string{
		records.KeyDKIM: store.DomainVerified, records.KeyTracking: store.DomainVerified}))
	sealer, err := tracking.NewSealer(box.DeriveKey(tracking.KeyPurpose))
	require.NoError(t, err)
	e := send(nil)
	deliver(e)
	checkTracked(t, mx.Messages()[2:], e, d, key, sealer)
	for _, m := range mx.Messages()[2:] {
		require.Contains(t, string(m.Data), "price-list.txt", "built again per recipient with the attachments")
	}

	// Mail submitted over SMTP: its HTML part is tracked alike.
	source := strings.ReplaceAll("From: Shop <hello@shop.test>\nTo: a@dest.test, b@dest.test\nSubject: Sale\n"+
		"MIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain\n\nSale\n"+
		"--b\nContent-Type: text/html; charset=utf-8\n\n"+html+"\n--b--\n", "\n", "\r\n")
	e = send([]byte(source))
	deliver(e)
	checkTracked(t, mx.Messages()[4:], e, d, key, sealer)
}

// checkTracked checks the messages of e's two recipients: each signed,
// its own links and pixel, the unsubscribe link untouched.
func checkTracked(t *testing.T, msgs []smtptest.Message, e store.Email, d store.Domain, key dkim.Key,
	sealer *tracking.Sealer) {
	t.Helper()
	require.Len(t, msgs, 2, "one message per recipient")
	for _, m := range msgs {
		require.Len(t, m.To, 1)
		verifyDKIM(t, m.Data, "shop.test", key)
		body := trackedHTMLPart(t, m.Data)
		require.NotContains(t, body, "https://shop.example/sale")
		require.Contains(t, body, unsubBase+"/unsubscribe/abc", "the unsubscribe link is left alone")
		found := trackedLink.FindAllStringSubmatch(body, -1)
		require.Len(t, found, 2, body)
		want := map[string]tracking.Token{
			"c": {Kind: tracking.Click, TeamID: d.TeamID, EmailID: e.ID, URL: "https://shop.example/sale",
				Host: "links.shop.test"},
			"o": {Kind: tracking.Open, TeamID: d.TeamID, EmailID: e.ID, Host: "links.shop.test"},
		}
		for _, f := range found {
			tok, err := sealer.Open(f[2])
			require.NoError(t, err)
			w := want[f[1]]
			w.Recipient = tok.Recipient
			require.Equal(t, w, tok)
			require.Equal(t, m.To[0], e.Recipients[tok.Recipient].Address, "the token names this recipient")
		}
	}
}

// trackedHTMLPart returns the decoded text/html part of msg.
func trackedHTMLPart(t *testing.T, msg []byte) string {
	t.Helper()
	mr, err := mail.CreateReader(bytes.NewReader(msg))
	require.NoError(t, err)
	for {
		p, err := mr.NextPart()
		require.NoError(t, err, "no text/html part")
		if h, ok := p.Header.(*mail.InlineHeader); ok {
			if ct, _, _ := h.ContentType(); ct == "text/html" {
				b, err := io.ReadAll(p.Body)
				require.NoError(t, err)
				return string(b)
			}
		}
	}
}

// TestDeliverTrackedUnderDevAddress: in `posthaste dev` without a tracking
// host (Config.LocalTracking), mail from a domain with tracking on is
// tracked under dev's own address with no Tracking record verified, its
// tokens bound to that host.
func TestDeliverTrackedUnderDevAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	on := true
	require.NoError(t, st.Domains.UpdateDomain(ctx, d.TeamID, d.ID, store.DomainUpdate{OpenTracking: &on, ClickTracking: &on}, audit.Entry{}))
	html := `<p>Sale: <a href="https://shop.example/sale">go</a></p>`
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID,
		From: "Shop <hello@shop.test>", FromDomain: "shop.test", To: []string{"a@dest.test"}, Subject: "Sale",
		HTML: &html, LastEvent: store.EventQueued, CreatedAt: time.Now(),
		Recipients: []store.Recipient{{Address: "a@dest.test", Kind: "to", Domain: "dest.test", Status: store.EventQueued}}}
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	mx, client := destMX(t, smtptest.Options{})
	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box, LocalTracking: "http://localhost:3000"},
		st, client, nil, nil)
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare,
		contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Len(t, res.Groups, 1)
	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, contract.DeliverInput{EmailID: e.ID.String(),
		Domain: "dest.test", TLS: "opportunistic", Recipients: res.Groups[0].Recipients,
		ReturnPath: res.Groups[0].ReturnPath})
	require.NoError(t, err)
	msgs := mx.Messages()
	require.Len(t, msgs, 1)
	body := trackedHTMLPart(t, msgs[0].Data)
	require.NotContains(t, body, "https://shop.example/sale")
	require.NotContains(t, body, "links.shop.test")
	sealer, err := tracking.NewSealer(box.DeriveKey(tracking.KeyPurpose))
	require.NoError(t, err)
	found := regexp.MustCompile(`"http://localhost:3000/([co])/([A-Za-z0-9_-]+)"`).FindAllStringSubmatch(body, -1)
	require.Len(t, found, 2, body)
	for _, f := range found {
		tok, err := sealer.Open(f[2])
		require.NoError(t, err)
		require.Equal(t, "localhost", tok.Host)
		require.Equal(t, e.ID, tok.EmailID)
	}
}
