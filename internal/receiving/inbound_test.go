package receiving_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// The email and return path every fixture of internal/reports is about.
const (
	fixtureEmailID    = "0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60"
	fixtureReturnPath = "bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com"
)

// reportFixture reads a report sample of internal/reports and makes it
// about email id sent with return path rp: addresses in rcpts (fixture
// address → ours) are replaced too.
func reportFixture(t *testing.T, name string, id uuid.UUID, rp string, rcpts map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "reports", "testdata", name))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(b), fixtureReturnPath, rp)
	s = strings.ReplaceAll(s, fixtureEmailID, id.String())
	for from, to := range rcpts {
		s = strings.ReplaceAll(s, from, to)
	}
	return []byte(s)
}

// receive routes rp and commits raw as the inbound MX would, and returns
// the id of the stored row.
func receive(t *testing.T, st *store.Store, key []byte, rp string, raw []byte) uuid.UUID {
	t.Helper()
	return receiveAuth(t, st, key, rp, raw, inmail.Results{})
}

// fblAuth are the authentication results of a report that a feedback
// loop at domain sent: a DKIM signature of domain that passed.
func fblAuth(domain string) inmail.Results {
	return inmail.Results{DKIM: []inmail.DKIMResult{{Result: "pass", Domain: domain}},
		DMARC: inmail.DMARCResult{Result: "pass", FromDomain: domain, DKIMAligned: true}}
}

// rcptPath is the return path of recipient i of e, sent from d.
func rcptPath(t *testing.T, key []byte, e store.Email, i int, d store.Domain) string {
	t.Helper()
	rp, err := reports.RecipientReturnPath(key, e.ID, i, d.ReturnPath+"."+d.Name)
	require.NoError(t, err)
	return rp
}

// receiveAuth is receive with the MX's authentication results of the
// message.
func receiveAuth(t *testing.T, st *store.Store, key []byte, rp string, raw []byte, auth inmail.Results) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	in := store.NewInbound(st, nil)
	rt := inroute.New(st.Received, st.Emails, key, nil)
	r, err := rt.Route(ctx, rp)
	require.NoError(t, err)
	m := inmail.Message{ID: uuid.Must(uuid.NewV7()), Recipients: []inmail.Recipient{{Address: rp, Route: r}},
		ClientIP: netip.MustParseAddr("192.0.2.9"), Helo: "mail.example.net", ReceivedAt: time.Now(), Data: raw,
		Auth: auth}
	require.NoError(t, in.Accept(ctx, m))
	list, err := storetest.InboundMessages(ctx, st, r.TeamID, 1)
	require.NoError(t, err)
	require.Len(t, list, 1)
	return list[0].ID
}

func TestProcessInboundBouncesAndComplaints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	key := box.DeriveKey(reports.VERPKeyPurpose)
	d, _ := insertDomain(t, st, box, "shop.test")
	acts := newActivities(st, box, "example.com", "yahoo.com")
	process := func(id uuid.UUID) contract.ProcessInboundResult {
		t.Helper()
		res, err := run[contract.ProcessInboundInput, contract.ProcessInboundResult](t,
			acts.ProcessInboundMessage, contract.ProcessInboundInput{InboundID: id})
		require.NoError(t, err)
		return res
	}
	status := func(e store.Email) map[string]string { return recipientStatus(t, st, e) }
	suppression := func(addr string) string {
		sp, err := storetest.SuppressionByEmail(ctx, st, d.TeamID, addr)
		if err != nil {
			return ""
		}
		return sp.Reason
	}

	t.Run("DSN after delivered", func(t *testing.T) {
		e := domainEmail(t, st, d, "Nobody@dest.test", "other@dest.test")
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
			{Type: store.EventDelivered, Recipient: "Nobody@dest.test"},
			{Type: store.EventDelivered, Recipient: "other@dest.test"}}))
		rp := rcptPath(t, key, e, 0, d)
		id := receive(t, st, key, rp, reportFixture(t, "postfix-failed.eml", e.ID, rp,
			map[string]string{"nobody@example.org": "nobody@dest.test"}))
		res := process(id)
		require.Equal(t, contract.ProcessInboundResult{Kind: "dsn", EmailID: e.ID, Events: 1, Suppressed: 1}, res)
		require.Equal(t, map[string]string{"Nobody@dest.test": "bounced", "other@dest.test": "delivered"}, status(e))
		bs, err := st.Emails.Bounces(ctx, d.TeamID, e.ID)
		require.NoError(t, err)
		b := bs["Nobody@dest.test"]
		require.Equal(t, "Permanent", b.Type)
		require.Equal(t, "NoEmail", b.SubType)
		require.Len(t, b.DiagnosticCode, 1)
		require.Contains(t, b.DiagnosticCode[0], "550 5.1.1")
		require.Equal(t, store.SuppressionBounce, suppression("nobody@dest.test"))
		require.Empty(t, suppression("other@dest.test"))

		again := process(id)
		require.Equal(t, "dsn", again.Kind)
		require.Zero(t, again.Events, "a processed message is left alone")
		evs, err := st.Emails.Events(ctx, e.ID)
		require.NoError(t, err)
		require.Len(t, evs, 4, "queued, two delivered, one bounced")
	})

	t.Run("DSN naming an address the email did not have", func(t *testing.T) {
		e := domainEmail(t, st, d, "real@dest.test")
		rp := rcptPath(t, key, e, 0, d)
		id := receive(t, st, key, rp, reportFixture(t, "postfix-failed.eml", e.ID, rp,
			map[string]string{"nobody@example.org": "victim@dest.test"}))
		res := process(id)
		require.Equal(t, contract.ProcessInboundResult{Kind: "dsn", EmailID: e.ID}, res)
		require.Equal(t, map[string]string{"real@dest.test": "queued"}, status(e))
		require.Empty(t, suppression("victim@dest.test"), "a forged DSN suppresses nobody")
		got, err := st.Received.InboundByID(ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.InboundProcessed, got.Status)
	})

	t.Run("delayed DSN", func(t *testing.T) {
		e := domainEmail(t, st, d, "slow@dest.test")
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventSent}}))
		rp := rcptPath(t, key, e, 0, d)
		raw := reportFixture(t, "postfix-delayed.eml", e.ID, rp, map[string]string{"slow@example.org": "slow@dest.test"})
		res := process(receive(t, st, key, rp, raw))
		require.Equal(t, 1, res.Events)
		require.Zero(t, res.Suppressed)
		require.Equal(t, map[string]string{"slow@dest.test": "delivery_delayed"}, status(e))
		process(receive(t, st, key, rp, raw))
		evs, err := st.Emails.Events(ctx, e.ID)
		require.NoError(t, err)
		n := 0
		for _, ev := range evs {
			if ev.Type == store.EventDeliveryDelayed {
				n++
			}
		}
		require.Equal(t, 1, n, "delivery_delayed at most once")
	})

	t.Run("ARF complaint", func(t *testing.T) {
		e := domainEmail(t, st, d, "user@dest.test", "quiet@dest.test")
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
			{Type: store.EventDelivered, Recipient: "user@dest.test"},
			{Type: store.EventDelivered, Recipient: "quiet@dest.test"}}))
		rp := rcptPath(t, key, e, 0, d)
		res := process(receiveAuth(t, st, key, rp, reportFixture(t, "rfc5965-arf.eml", e.ID, rp,
			map[string]string{"user@example.com": "user@dest.test"}), fblAuth("example.com")))
		require.Equal(t, contract.ProcessInboundResult{Kind: "feedback", EmailID: e.ID, Events: 1, Suppressed: 1}, res)
		require.Equal(t, map[string]string{"user@dest.test": "complained", "quiet@dest.test": "delivered"}, status(e))
		require.Equal(t, store.SuppressionComplaint, suppression("user@dest.test"))
		require.Empty(t, suppression("quiet@dest.test"))
	})

	t.Run("Yahoo complaint without a recipient", func(t *testing.T) {
		e := domainEmail(t, st, d, "only@dest.test")
		rp := rcptPath(t, key, e, 0, d)
		res := process(receiveAuth(t, st, key, rp, reportFixture(t, "yahoo-arf.eml", e.ID, rp, nil), fblAuth("yahoo.com")))
		require.Equal(t, 1, res.Events)
		require.Equal(t, map[string]string{"only@dest.test": "complained"}, status(e))
		require.Equal(t, store.SuppressionComplaint, suppression("only@dest.test"))

		// The return path names the recipient the report does not.
		two := domainEmail(t, st, d, "one@dest.test", "two@dest.test")
		rp = rcptPath(t, key, two, 1, d)
		res = process(receiveAuth(t, st, key, rp, reportFixture(t, "yahoo-arf.eml", two.ID, rp, nil), fblAuth("yahoo.com")))
		require.Equal(t, 1, res.Events)
		require.Equal(t, map[string]string{"one@dest.test": "queued", "two@dest.test": "complained"}, status(two))
	})

	t.Run("auto-reply", func(t *testing.T) {
		e := domainEmail(t, st, d, "away@dest.test")
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventDelivered, Recipient: "away@dest.test"}}))
		rp := rcptPath(t, key, e, 0, d)
		raw := []byte("From: away@dest.test\r\nTo: " + rp + "\r\nSubject: Out of Office: hi\r\n" +
			"Auto-Submitted: auto-replied\r\n\r\nI am away.\r\n")
		res := process(receive(t, st, key, rp, raw))
		require.Equal(t, contract.ProcessInboundResult{Kind: "auto_reply", EmailID: uuid.Nil}, res)
		require.Equal(t, map[string]string{"away@dest.test": "delivered"}, status(e))
	})

	t.Run("report about an email that is gone", func(t *testing.T) {
		e := domainEmail(t, st, d, "gone@dest.test")
		rp := rcptPath(t, key, e, 0, d)
		id := receive(t, st, key, rp, reportFixture(t, "postfix-failed.eml", e.ID, rp,
			map[string]string{"nobody@example.org": "gone@dest.test"}))
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventFailed, Recipient: "gone@dest.test"}}))
		_, err := st.Webhooks.DrainOutbox(ctx, 1000, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
			var done []store.OutboxResult
			for _, it := range items {
				done = append(done, store.OutboxResult{ID: it.ID, Done: true})
			}
			return done
		})
		require.NoError(t, err)
		_, err = st.Privacy.PurgeEmails(ctx, time.Now().Add(time.Hour), 1000)
		require.NoError(t, err)
		_, err = st.Emails.GetEmail(ctx, d.TeamID, e.ID)
		require.ErrorIs(t, err, store.ErrNotFound, "purged")
		res := process(id)
		require.Equal(t, contract.ProcessInboundResult{Kind: "dsn"}, res, "ignored without error")
	})
}
