package store_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

var verpKey = []byte("0123456789abcdef0123456789abcdef")

// domainEmail inserts an email of team sent from a new domain name.
func domainEmail(t *testing.T, st *store.Store, team uuid.UUID, name string, created time.Time,
	rcpts ...string) (store.Email, store.Domain) {
	t.Helper()
	d := newDomain(team, name)
	require.NoError(t, st.Domains.CreateDomain(context.Background(), d))
	e := newEmail(team, rcpts...)
	e.DomainID, e.FromDomain, e.CreatedAt = &d.ID, name, created
	_, err := storetest.InsertEmail(context.Background(), st, e)
	require.NoError(t, err)
	return e, d
}

func TestInboundRouteReturnPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	in := store.NewInbound(st, nil)
	rt := inroute.New(st.Received, st.Emails, verpKey, nil)
	e, _ := domainEmail(t, st, team, "shop.test", time.Now(), "a@dest.test", "b@dest.test")
	old, _ := domainEmail(t, st, team, "old.test", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), "a@dest.test")
	rcptPath := func(key []byte, id uuid.UUID, i int, host string) string {
		t.Helper()
		a, err := reports.RecipientReturnPath(key, id, i, host)
		require.NoError(t, err)
		return a
	}

	second := rcptPath(verpKey, e.ID, 1, "send.shop.test")
	r, err := rt.Route(ctx, second)
	require.NoError(t, err)
	require.Equal(t, inmail.Route{Kind: inmail.RouteReturnPath, TeamID: team, DomainID: *e.DomainID, EmailID: e.ID}, r)

	// Emails from before per-recipient return paths (migration 00040)
	// went out with the per-email forms: they still route.
	oldSigned := reports.SignedReturnPath(verpKey, old.ID, "send.old.test")
	r, err = rt.Route(ctx, oldSigned)
	require.NoError(t, err, "an email from before per-recipient return paths: its signed return path still routes")
	require.Equal(t, old.ID, r.EmailID)
	oldUnsigned := "bounces+" + old.ID.String() + "@send.old.test"
	r, err = rt.Route(ctx, oldUnsigned)
	require.NoError(t, err, "an email from before signing went out unsigned: its return path still routes")
	require.Equal(t, old.ID, r.EmailID)

	for name, rcpt := range map[string]string{
		"per email, signed, for a new email": reports.SignedReturnPath(verpKey, e.ID, "send.shop.test"),
		"unsigned for a new email":           "bounces+" + e.ID.String() + "@send.shop.test",
		"signature of another key":           rcptPath([]byte("another key, 32 bytes long......"), e.ID, 0, "send.shop.test"),
		"a recipient the email lacks":        rcptPath(verpKey, e.ID, 2, "send.shop.test"),
		"per email, another key":             reports.SignedReturnPath([]byte("another key, 32 bytes long......"), old.ID, "send.old.test"),
		"per email, signature of another id": "bounces+" + old.ID.String() + "-" + reports.Sign(verpKey, e.ID) + "@send.old.test",
		"another domain's host":              rcptPath(verpKey, e.ID, 0, "send.old.test"),
		"the domain, not its label":          rcptPath(verpKey, e.ID, 0, "shop.test"),
		"unknown email, unsigned":            "bounces+" + uuid.Must(uuid.NewV7()).String() + "@send.shop.test",
		"unknown email, forged":              rcptPath([]byte("another key, 32 bytes long......"), uuid.Must(uuid.NewV7()), 0, "send.shop.test"),
		"not a return path":                  "postmaster@send.shop.test",
		"a foreign domain":                   "user@elsewhere.test",
	} {
		_, err := rt.Route(ctx, rcpt)
		require.ErrorIs(t, err, inmail.ErrNotOurs, name)
	}

	// A report about an email we signed for but no longer keep is ours,
	// and dropped: a message for it alone is accepted, stored nowhere.
	for _, gone := range []string{rcptPath(verpKey, uuid.Must(uuid.NewV7()), 3, "send.shop.test"),
		reports.SignedReturnPath(verpKey, uuid.Must(uuid.NewV7()), "send.shop.test")} {
		r, err = rt.Route(ctx, gone)
		require.NoError(t, err)
		require.Equal(t, inmail.Route{Kind: inmail.RouteDiscard}, r)
		require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), Data: []byte("Subject: x\r\n\r\nx\r\n"),
			Recipients: []inmail.Recipient{{Address: gone, Route: r}}}))
	}
	msgs, err := storetest.InboundMessages(ctx, st, team, 10)
	require.NoError(t, err)
	require.Empty(t, msgs, "nothing stored")

	// Without a key only the unsigned addresses of old emails route.
	nokeyRt := inroute.New(st.Received, st.Emails, nil, nil)
	for _, signed := range []string{second, oldSigned} {
		_, err = nokeyRt.Route(ctx, signed)
		require.ErrorIs(t, err, inmail.ErrNotOurs)
	}
	_, err = nokeyRt.Route(ctx, oldUnsigned)
	require.NoError(t, err)
}

func TestInboundAcceptSplitsPerTeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	commits := 0
	in := store.NewInbound(st, func() { commits++ })
	rt := inroute.New(st.Received, st.Emails, verpKey, nil)
	ea, da := domainEmail(t, st, teamA, "a.test", time.Now(), "x@dest.test")
	eb, db := domainEmail(t, st, teamB, "b.test", time.Now(), "y@dest.test")
	var rcpts []inmail.Recipient
	for _, x := range []struct {
		e store.Email
		d store.Domain
	}{{ea, da}, {eb, db}} {
		addr, err := reports.RecipientReturnPath(verpKey, x.e.ID, 0, "send."+x.d.Name)
		require.NoError(t, err)
		r, err := rt.Route(ctx, addr)
		require.NoError(t, err)
		rcpts = append(rcpts, inmail.Recipient{Address: addr, Route: r})
	}
	m := inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: "", Recipients: rcpts,
		ClientIP: netip.MustParseAddr("192.0.2.7"), Helo: "mx.dest.test", TLS: true, ReceivedAt: time.Now(),
		Data: []byte("Subject: x\r\n\r\nbody\r\n"), Auth: inmail.Results{SPF: inmail.SPFResult{Result: "pass"}},
		AuthHeader: "mx.test; spf=pass"}
	require.NoError(t, in.Accept(ctx, m))
	require.Equal(t, 1, commits)

	la, err := storetest.InboundMessages(ctx, st, teamA, 10)
	require.NoError(t, err)
	require.Len(t, la, 1)
	lb, err := storetest.InboundMessages(ctx, st, teamB, 10)
	require.NoError(t, err)
	require.Len(t, lb, 1)
	a := la[0]
	require.Equal(t, m.ID, a.MessageID)
	require.NotEqual(t, a.ID, lb[0].ID)
	require.Equal(t, []store.InboundRecipient{{Address: rcpts[0].Address, Kind: inmail.RouteReturnPath,
		DomainID: da.ID, EmailID: &ea.ID}}, a.Recipients, "team A sees only its own recipient")
	require.Equal(t, eb.ID, *lb[0].Recipients[0].EmailID)
	require.Equal(t, []string{"return_path"}, a.Kinds)
	require.Equal(t, "192.0.2.7", a.ClientIP.String())
	require.Equal(t, "pass", a.Auth.SPF.Result)
	require.Equal(t, m.Data, a.Raw)
	require.Equal(t, store.InboundAccepted, a.Status)

	var kinds []string
	_, err = st.Webhooks.DrainOutbox(ctx, 10, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
		for _, it := range items {
			if it.Kind == store.OutboxInbound {
				kinds = append(kinds, it.TeamID.String()+"/"+it.Ref.String())
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{teamA.String() + "/" + a.ID.String(), teamB.String() + "/" + lb[0].ID.String()}, kinds,
		"one outbox entry per team row")

	// Processed once, for its own team only.
	require.NoError(t, st.Received.MarkInboundProcessed(ctx, teamB, a.ID, "dsn"))
	got, err := st.Received.InboundByID(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, store.InboundAccepted, got.Status, "team B cannot mark team A's message")
	require.NoError(t, st.Received.MarkInboundProcessed(ctx, teamA, a.ID, "dsn"))
	require.NoError(t, st.Received.MarkInboundProcessed(ctx, teamA, a.ID, "unknown"))
	got, err = st.Received.InboundByID(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, store.InboundProcessed, got.Status)
	require.Equal(t, "dsn", got.Result, "marking again changes nothing")

	// Lookups by VERP stay within the team.
	v, _ := reports.ParseVERP(rcpts[0].Address)
	_, err = inroute.New(st.Received, st.Emails, verpKey, nil).EmailByVERP(ctx, teamB, v)
	require.ErrorIs(t, err, store.ErrNotFound)
	found, err := inroute.New(st.Received, st.Emails, verpKey, nil).EmailByVERP(ctx, teamA, v)
	require.NoError(t, err)
	require.Equal(t, ea.ID, found.ID)

	// Retention: 30 days after arrival.
	n, err := st.Privacy.PurgeExpired(ctx, time.Now().Add(29*24*time.Hour), 100)
	require.NoError(t, err)
	_, err = st.Received.InboundByID(ctx, a.ID)
	require.NoError(t, err, "kept for 30 days (purged %d)", n)
	_, err = st.Privacy.PurgeExpired(ctx, time.Now().Add(31*24*time.Hour), 100)
	require.NoError(t, err)
	_, err = st.Received.InboundByID(ctx, a.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestBouncedAfterDeliveredIsTheOnlyLateOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	e := newEmail(team, "a@dest.test", "b@dest.test")
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	bounce := map[string]any{"type": "Permanent", "subType": "General", "message": "async",
		"diagnosticCode": []string{"smtp; 550 5.1.1 no"}}
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
		{Type: store.EventDelivered, Recipient: "a@dest.test"},
		{Type: store.EventFailed, Recipient: "b@dest.test"},
	}))
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
		{Type: store.EventDeliveryDelayed, Recipient: "a@dest.test"},
		{Type: store.EventFailed, Recipient: "a@dest.test"},
		{Type: store.EventDeliveryDelayed, Recipient: "a@dest.test", Async: true},
		{Type: store.EventBounced, Recipient: "b@dest.test", Detail: bounce, Async: true},
	}))
	got, err := st.Emails.GetEmail(ctx, team, e.ID)
	require.NoError(t, err)
	require.Equal(t, []string{store.EventDelivered, store.EventFailed},
		[]string{got.Recipients[0].Status, got.Recipients[1].Status}, "no other outcome after a final state")

	// A synchronous bounce cannot follow delivered; an asynchronous one
	// can, once.
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
		{Type: store.EventBounced, Recipient: "a@dest.test", Detail: bounce}}))
	got, err = st.Emails.GetEmail(ctx, team, e.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventDelivered, got.Recipients[0].Status)
	for range 2 { // a repeat is harmless
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
			{Type: store.EventBounced, Recipient: "a@dest.test", Detail: bounce, Async: true}}))
	}
	got, err = st.Emails.GetEmail(ctx, team, e.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventBounced, got.Recipients[0].Status)
	require.Equal(t, store.EventBounced, got.LastEvent)
	evs, err := st.Emails.Events(ctx, e.ID)
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type+":"+ev.Recipient)
	}
	require.Equal(t, []string{"queued:", "delivered:a@dest.test", "failed:b@dest.test", "bounced:a@dest.test"}, types)
	bs, err := st.Emails.Bounces(ctx, team, e.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"smtp; 550 5.1.1 no"}, bs["a@dest.test"].DiagnosticCode)
}
