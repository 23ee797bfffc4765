package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/unsubscribe"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
	"github.com/posthaste/posthaste/workflows/contract"
)

const unsubBase = "https://mail.posthaste.example"

func testLinks(t *testing.T) *unsubscribe.Links {
	t.Helper()
	l, err := unsubscribe.NewLinks(unsubBase, bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	return l
}

// verifyDKIM checks msg's one DKIM signature against key and returns the
// signed header fields, lower-cased.
func verifyDKIM(t *testing.T, msg []byte, domain string, key dkim.Key) []string {
	t.Helper()
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(msg), &msgdkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) {
			if name != "sel._domainkey."+domain {
				return nil, errors.New("unexpected lookup " + name)
			}
			return []string{dkim.RecordValue(key.PublicBase64)}, nil
		},
	})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	require.NoError(t, verifs[0].Err)
	return lower(verifs[0].HeaderKeys)
}

func header(t *testing.T, msg []byte) mail.Header {
	t.Helper()
	r, err := mail.CreateReader(bytes.NewReader(msg))
	require.NoError(t, err)
	return r.Header
}

func TestBuildForRecipient(t *testing.T) {
	t.Parallel()
	html := `<p>News</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a> <a href="{{{UNSUBSCRIBE_URL}}}">x</a>`
	text := "News\nUnsubscribe: {{{RESEND_UNSUBSCRIBE_URL}}}"
	topic := uuid.New()
	e := store.Email{ID: uuid.New(), TeamID: uuid.New(), From: "Shop <hello@shop.test>", FromDomain: "shop.test",
		To: []string{"a@dest.test"}, Subject: "Hello", HTML: &html, Text: &text, TopicID: &topic,
		Headers: []store.Header{{Name: "list-unsubscribe", Value: "<mailto:u@shop.test>"}, {Name: "X-Ref", Value: "1"}}}
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.FixedZone("", 3600))
	const url = unsubBase + "/unsubscribe/TOKEN_a-1"
	msg, err := delivery.BuildForRecipient(e, at, url, "")
	require.NoError(t, err)
	again, err := delivery.BuildForRecipient(e, at, url, "")
	require.NoError(t, err)
	require.Equal(t, stripBoundaries(t, msg), stripBoundaries(t, again), "a rebuild is the same message")
	require.Equal(t, `<p>News</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a> <a href="{{{UNSUBSCRIBE_URL}}}">x</a>`,
		*e.HTML, "the email is not changed")

	h := header(t, msg)
	require.Equal(t, []string{"<" + url + ">"}, h.Values("List-Unsubscribe"), "the sender's own field is replaced")
	require.Equal(t, []string{"List-Unsubscribe=One-Click"}, h.Values("List-Unsubscribe-Post"))
	require.Equal(t, "1", h.Get("X-Ref"))
	date, err := h.Date()
	require.NoError(t, err)
	require.True(t, date.Equal(at))
	body := string(msg)
	require.NotContains(t, body, "{{{")
	require.Contains(t, body, `href=3D"`+url) // quoted-printable
	require.Contains(t, body, "Unsubscribe: "+url)

	key, err := dkim.GenerateKey()
	require.NoError(t, err)
	signer, err := dkim.ParsePrivateKey(key.PrivatePKCS8)
	require.NoError(t, err)
	signed, err := dkim.Sign(msg, "shop.test", "sel", signer)
	require.NoError(t, err)
	keys := verifyDKIM(t, signed, "shop.test", key)
	require.Contains(t, keys, "list-unsubscribe")
	require.Contains(t, keys, "list-unsubscribe-post", "RFC 8058 §3.1: both fields are signed")

	// With a mailto address, it is the second entry (RFC 2369 §3.2).
	const addr = "unsubscribe+code@send.shop.test"
	withMailto, err := delivery.BuildForRecipient(e, at, url, addr)
	require.NoError(t, err)
	wh := header(t, withMailto)
	require.Equal(t, []string{"<" + url + ">, <mailto:" + addr + ">"}, wh.Values("List-Unsubscribe"))
}

// stripBoundaries removes the random MIME boundaries, the only part of a
// built message that differs between builds.
func stripBoundaries(t *testing.T, msg []byte) string {
	h := header(t, msg)
	_, params, _ := h.ContentType()
	s := string(msg)
	if b := params["boundary"]; b != "" {
		s = strings.ReplaceAll(s, b, "BOUNDARY")
	}
	return s
}

// TestDeliverTopicEmailPerRecipient: two recipients of one domain get
// messages that differ only in their own unsubscribe link, each signed,
// each in its own transaction over one connection; the stored copy shows
// nobody's link.
func TestDeliverTopicEmailPerRecipient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, key := insertDomain(t, st, box, "shop.test")
	tp, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, Name: "News",
		DefaultSubscription: store.TopicOptIn, Visibility: "public"})
	require.NoError(t, err)
	html := `<p>News</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>`
	rcpts := []string{"a@dest.test", "B@dest.test"}
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID, TopicID: &tp.ID,
		From: "Shop <hello@shop.test>", FromDomain: "shop.test", To: rcpts, Subject: "News", HTML: &html,
		GenerateText: true, LastEvent: store.EventQueued, CreatedAt: time.Now(),
		Attachments: []store.Attachment{{Filename: "agenda.txt", ContentType: "text/plain", Content: []byte("agenda")}}}
	for _, r := range rcpts {
		e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: "dest.test", Status: store.EventQueued})
	}
	_, err = storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	mx, client := destMX(t, smtptest.Options{})
	links := testLinks(t)

	// Without links (no public URL or master key) it cannot be built.
	noLinks := delivery.New(delivery.Config{Hostname: "out.example", Keys: box}, st, client, nil, nil)
	_, err = run[contract.PrepareInput, contract.PrepareResult](t, noLinks.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Error(), "POSTHASTE_PUBLIC_URL")

	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box, Unsubscribe: links}, st, client, nil, nil)
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Len(t, res.Groups, 1)
	stored, err := st.Emails.Message(ctx, e.ID)
	require.NoError(t, err)
	sh := header(t, stored)
	require.Empty(t, sh.Get("List-Unsubscribe"), "the stored copy has nobody's link")
	require.NotContains(t, string(stored), unsubBase)
	require.Contains(t, string(stored), "{{{RESEND_UNSUBSCRIBE_URL}}}")
	storedDate, err := sh.Date()
	require.NoError(t, err)

	in := contract.DeliverInput{EmailID: e.ID.String(), Domain: "dest.test", TLS: "opportunistic",
		Recipients: res.Groups[0].Recipients, ReturnPath: res.Groups[0].ReturnPath}
	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, in)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a@dest.test": "delivered", "B@dest.test": "delivered"}, recipientStatus(t, st, e))

	msgs := mx.Messages()
	require.Len(t, msgs, 2, "one transaction per recipient")
	require.Equal(t, 1, mx.Connections(), "over one connection")
	seen := map[string]bool{}
	for _, m := range msgs {
		require.Len(t, m.To, 1)
		rcpt := m.To[0]
		keys := verifyDKIM(t, m.Data, "shop.test", key)
		require.Contains(t, keys, "list-unsubscribe")
		require.Contains(t, keys, "list-unsubscribe-post")
		h := header(t, m.Data)
		require.Equal(t, "List-Unsubscribe=One-Click", h.Get("List-Unsubscribe-Post"))
		lu := h.Get("List-Unsubscribe")
		httpEntry, mailtoEntry, found := strings.Cut(lu, ", ")
		require.True(t, found, "two entries: %s", lu)
		require.True(t, strings.HasPrefix(httpEntry, "<"+unsubBase+"/unsubscribe/") && strings.HasSuffix(httpEntry, ">"), lu)
		url := strings.Trim(httpEntry, "<>")
		// The mailto entry names this recipient of this email, at the
		// domain's return-path host, under the mailto key.
		require.True(t, strings.HasPrefix(mailtoEntry, "<mailto:") && strings.HasSuffix(mailtoEntry, ">"), lu)
		ma, ok := mailto.Parse(strings.TrimSuffix(strings.TrimPrefix(mailtoEntry, "<mailto:"), ">"))
		require.True(t, ok, lu)
		require.True(t, ma.Verify(box.DeriveKey(mailto.KeyPurpose)))
		require.Equal(t, e.ID, ma.EmailID)
		require.Equal(t, rcpt, e.Recipients[ma.Index].Address)
		require.Equal(t, d.ReturnPath+"."+d.Name, ma.Host)
		require.False(t, seen[url], "each recipient has its own link")
		seen[url] = true
		require.Contains(t, string(m.Data), url, "the body's link is the recipient's")
		require.NotContains(t, string(m.Data), "{{{")
		require.Contains(t, string(m.Data), "agenda.txt", "built per recipient with the attachments")
		tok, err := links.Sealer.Open(strings.TrimPrefix(url, unsubBase+"/unsubscribe/"))
		require.NoError(t, err)
		require.Equal(t, unsubscribe.Token{TeamID: d.TeamID, EmailID: e.ID, TopicID: &tp.ID, Email: rcpt}, tok)
		date, err := h.Date()
		require.NoError(t, err)
		require.True(t, date.Equal(storedDate), "dated like the stored copy")
	}
	require.ElementsMatch(t, rcpts, []string{msgs[0].To[0], msgs[1].To[0]})
}

// TestDeliverTopicEmailFromTheSandbox: the sandbox sender's topic mail to
// a real address is built per recipient too, unsigned like all sandbox
// mail; sandbox addresses are simulated as before.
func TestDeliverTopicEmailFromTheSandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	e := insertEmail(t, st, "member@dest.test", "delivered@posthaste.test")
	tp, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: e.TeamID, Name: "News",
		DefaultSubscription: store.TopicOptIn, Visibility: "public"})
	require.NoError(t, err)
	// insertEmail has no topic: give it one, as acceptance would have.
	html := `<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>`
	e.ID, e.TopicID, e.HTML = uuid.Must(uuid.NewV7()), &tp.ID, &html
	_, err = storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	mx, client := destMX(t, smtptest.Options{})
	acts := delivery.New(delivery.Config{Hostname: "out.example", Unsubscribe: testLinks(t)}, st, client, nil, nil)
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Len(t, res.Sandbox, 1)
	require.Len(t, res.Groups, 1)
	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, contract.DeliverInput{EmailID: e.ID.String(),
		Domain: "dest.test", TLS: "opportunistic", Recipients: res.Groups[0].Recipients})
	require.NoError(t, err)
	msgs := mx.Messages()
	require.Len(t, msgs, 1)
	h := header(t, msgs[0].Data)
	require.Empty(t, h.Get("DKIM-Signature"))
	require.True(t, strings.HasPrefix(h.Get("List-Unsubscribe"), "<"+unsubBase+"/unsubscribe/"))
	require.NotContains(t, h.Get("List-Unsubscribe"), "mailto:", "the sandbox has no return-path host to receive it")
	require.NotContains(t, string(msgs[0].Data), "{{{")
}

// crashAfter is a Deliverer that delivers its first n calls and then
// panics, as a worker killed between two recipients' transactions.
type crashAfter struct {
	delivery.Deliverer
	n int
}

func (c *crashAfter) Deliver(ctx context.Context, domain string, env mta.Envelope) []mta.Result {
	if c.n == 0 {
		panic("worker killed")
	}
	c.n--
	return c.Deliverer.Deliver(ctx, domain, env)
}

// TestDeliverTopicEmailRecordsEachRecipientAtOnce: mail built per
// recipient goes out in one transaction per recipient, and each outcome
// is recorded as it comes, so an attempt that dies after the first
// recipient leaves it delivered and its retry sends only to the other.
func TestDeliverTopicEmailRecordsEachRecipientAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	tp, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, Name: "News",
		DefaultSubscription: store.TopicOptIn, Visibility: "public"})
	require.NoError(t, err)
	html := `<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>`
	rcpts := []string{"a@dest.test", "b@dest.test"}
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID, TopicID: &tp.ID,
		From: "hello@shop.test", FromDomain: "shop.test", To: rcpts, Subject: "News", HTML: &html,
		LastEvent: store.EventQueued, CreatedAt: time.Now()}
	for _, r := range rcpts {
		e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: "dest.test", Status: store.EventQueued})
	}
	_, err = storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	mx, client := destMX(t, smtptest.Options{})
	cfg := delivery.Config{Hostname: "out.example", Keys: box, Unsubscribe: testLinks(t)}
	dying := delivery.New(cfg, st, &crashAfter{Deliverer: client, n: 1}, nil, nil)
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, dying.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	in := contract.DeliverInput{EmailID: e.ID.String(), Domain: "dest.test", TLS: "opportunistic",
		Recipients: res.Groups[0].Recipients, ReturnPath: res.Groups[0].ReturnPath}

	_, err = run[contract.DeliverInput, struct{}](t, dying.Deliver, in)
	require.Error(t, err, "the attempt died")
	require.Len(t, mx.Messages(), 1)
	first := mx.Messages()[0].To[0]
	status := recipientStatus(t, st, e)
	require.Equal(t, "delivered", status[first], "recorded before the attempt died")

	retry := delivery.New(cfg, st, client, nil, nil)
	_, err = run[contract.DeliverInput, struct{}](t, retry.Deliver, in)
	require.NoError(t, err)
	msgs := mx.Messages()
	require.Len(t, msgs, 2, "the retry sent only to the other recipient")
	require.ElementsMatch(t, rcpts, []string{msgs[0].To[0], msgs[1].To[0]})
	require.Equal(t, map[string]string{"a@dest.test": "delivered", "b@dest.test": "delivered"}, recipientStatus(t, st, e))
}
