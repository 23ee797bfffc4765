package receiving_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/webhook"
	"github.com/posthaste/posthaste/workflows/contract"
)

const receivedFixture = `From: Ann <ann@example.org>
To: support@shop.test
Cc: bob@example.net
Subject: Help please
Message-ID: <q1@example.org>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b"

--b
Content-Type: text/plain

Hello, my order is late.
--b
Content-Type: application/pdf
Content-Disposition: attachment; filename="order.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQK
--b--
`

func enableReceiving(t *testing.T, st *store.Store, d store.Domain) {
	t.Helper()
	on := store.ReceivingEnabled
	require.NoError(t, st.Domains.UpdateDomain(context.Background(), d.TeamID, d.ID, store.DomainUpdate{Receiving: &on}, audit.Entry{}))
}

func TestRouteReceiving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	rt := inroute.New(st.Received, st.Emails, nil, nil)

	// Receiving disabled (the default): not ours, whatever the address.
	_, err := rt.Route(ctx, "support@shop.test")
	require.ErrorIs(t, err, inmail.ErrNotOurs)

	enableReceiving(t, st, d)
	r, err := rt.Route(ctx, "Support@SHOP.test")
	require.NoError(t, err)
	require.Equal(t, inmail.Route{Kind: inmail.RouteReceiving, TeamID: d.TeamID, DomainID: d.ID}, r)
	for _, rcpt := range []string{"support@other.test", "support@sub.shop.test", "shop.test", "a@"} {
		_, err = rt.Route(ctx, rcpt)
		require.ErrorIs(t, err, inmail.ErrNotOurs, rcpt)
	}

	// An unverified domain of the same name elsewhere routes nowhere, and
	// does not take the verified one's mail.
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	u := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "claimed.test", Region: "eu-west-1",
		Status: store.DomainPending, ReturnPath: "bounce", TLS: store.TLSEnforced, DKIMSelector: "sel",
		DKIMPublicKey: "x", DKIMPrivateKey: []byte("x")}
	require.NoError(t, st.Domains.CreateDomain(ctx, u))
	enableReceiving(t, st, u)
	_, err = rt.Route(ctx, "x@claimed.test")
	require.ErrorIs(t, err, inmail.ErrNotOurs)

	// A deleted domain no longer receives.
	require.NoError(t, st.Domains.DeleteDomain(ctx, d.TeamID, d.ID, audit.Entry{}))
	_, err = rt.Route(ctx, "support@shop.test")
	require.ErrorIs(t, err, inmail.ErrNotOurs)
}

func TestProcessInboundReceiving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	enableReceiving(t, st, d)
	wid := uuid.Must(uuid.NewV7())
	sealed, err := box.Seal(webhook.NewSecret(), wid[:])
	require.NoError(t, err)
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: wid, TeamID: d.TeamID, Endpoint: "https://hooks.example/x",
		Events: []string{"email.received"}, Status: store.WebhookEnabled, Secret: sealed}))

	raw := []byte(strings.ReplaceAll(receivedFixture, "\n", "\r\n"))
	id := receive(t, st, nil, "support@shop.test", raw)
	acts := newActivities(st, box)
	for i := range 2 { // a retry stores and announces nothing more
		res, err := run[contract.ProcessInboundInput, contract.ProcessInboundResult](t,
			acts.ProcessInboundMessage, contract.ProcessInboundInput{InboundID: id})
		require.NoError(t, err)
		if i == 0 {
			require.Equal(t, 1, res.Received)
		}
	}
	// Processing again after a crash between storing and marking the
	// message processed stores nothing twice either.
	e := store.ReceivedEmail{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: d.ID, InboundID: id,
		CreatedAt: time.Now()}
	_, inserted, err := st.Received.InsertReceivedEmail(ctx, e)
	require.NoError(t, err)
	require.False(t, inserted)

	list, more, err := st.Received.ListReceivedEmails(ctx, d.TeamID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, list, 1)
	got := list[0]
	require.Equal(t, "Ann <ann@example.org>", got.From)
	require.Equal(t, []string{"support@shop.test"}, got.To)
	require.Equal(t, []string{"bob@example.net"}, got.Cc)
	require.Equal(t, []string{"support@shop.test"}, got.ReceivedFor)
	require.Equal(t, "Help please", got.Subject)
	require.Equal(t, "<q1@example.org>", got.MessageID)
	require.Contains(t, *got.Text, "my order is late")
	require.Nil(t, got.HTML)
	require.Equal(t, "Help please", got.Headers["subject"])
	require.Len(t, got.Attachments, 1)
	att := got.Attachments[0]
	require.Equal(t, "order.pdf", att.Filename)
	require.Equal(t, 9, att.Size)
	full, err := st.Received.ReceivedAttachmentContent(ctx, d.TeamID, got.ID, att.ID)
	require.NoError(t, err)
	require.Equal(t, []byte("%PDF-1.4\n"), full.Content)
	rawBack, err := st.Received.ReceivedRaw(ctx, d.TeamID, got.ID)
	require.NoError(t, err)
	require.Equal(t, raw, rawBack)

	// One email.received event, metadata only.
	msgs, _, err := st.Webhooks.ListWebhookMessages(ctx, d.TeamID, wid, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "email.received", msgs[0].Type)
	var p struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(msgs[0].Payload, &p))
	require.Equal(t, got.ID.String(), p.Data["email_id"])
	require.Equal(t, "Help please", p.Data["subject"])
	require.Equal(t, []any{"support@shop.test"}, p.Data["received_for"])
	require.NotContains(t, p.Data, "text")
	require.NotContains(t, p.Data, "html")
	require.Equal(t, []any{map[string]any{"id": att.ID.String(), "filename": "order.pdf",
		"content_type": "application/pdf", "content_disposition": "attachment", "content_id": nil}},
		p.Data["attachments"])

	// Another team sees none of it.
	other, _ := insertDomain(t, st, box, "other.test")
	_, err = st.Received.GetReceivedEmail(ctx, other.TeamID, got.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Received.ReceivedAttachmentContent(ctx, other.TeamID, got.ID, att.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Received.ReceivedRaw(ctx, other.TeamID, got.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	list, _, err = st.Received.ListReceivedEmails(ctx, other.TeamID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)

	// Retention: the received email goes with its inbound message after
	// 30 days.
	_, err = st.Privacy.PurgeExpired(ctx, time.Now().Add(31*24*time.Hour), 100)
	require.NoError(t, err)
	_, err = st.Received.GetReceivedEmail(ctx, d.TeamID, got.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A message with raw 8-bit bytes and NULs, in no declared charset, is
// stored all the same (PostgreSQL refuses invalid UTF-8 and NUL in text).
func TestProcessInboundReceivingDirtyMessage(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	enableReceiving(t, st, d)
	raw := []byte("From: a@example.org\r\nTo: x@shop.test\r\nSubject: caf\xe9\x00\r\nX-Bin: \xff\x00\r\n\r\nna\xefve\x00\r\n")
	id := receive(t, st, nil, "x@shop.test", raw)
	acts := newActivities(st, box)
	res, err := run[contract.ProcessInboundInput, contract.ProcessInboundResult](t,
		acts.ProcessInboundMessage, contract.ProcessInboundInput{InboundID: id})
	require.NoError(t, err)
	require.Equal(t, 1, res.Received)
	list, _, err := st.Received.ListReceivedEmails(context.Background(), d.TeamID, store.Page{Limit: 1})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "caf\uFFFD\uFFFD", list[0].Subject)
}
