package receiving_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
	"github.com/posthaste/posthaste/workflows/contract"
)

// TestProcessInboundMailtoUnsubscribe: a message to a recipient's mailto
// unsubscribe address, whatever it says, opts that recipient (and only
// it) out of the email's topic, creating its contact, as the one-click
// POST does; again changes nothing; an email without a topic unsubscribes
// from everything.
func TestProcessInboundMailtoUnsubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	key := box.DeriveKey(mailto.KeyPurpose)
	d, _ := insertDomain(t, st, box, "shop.test")
	tp, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, Name: "News",
		DefaultSubscription: store.TopicOptIn, Visibility: "public"})
	require.NoError(t, err)
	acts := newActivities(st, box)
	host := d.ReturnPath + "." + d.Name
	deliverTo := func(addr string) contract.ProcessInboundResult {
		t.Helper()
		in := store.NewInbound(st, nil)
		rt := inroute.New(st.Received, st.Emails, nil, key)
		r, err := rt.Route(ctx, addr)
		require.NoError(t, err)
		require.Equal(t, inmail.RouteUnsubscribe, r.Kind)
		m := inmail.Message{ID: uuid.Must(uuid.NewV7()), Recipients: []inmail.Recipient{{Address: addr, Route: r}},
			ReceivedAt: time.Now(), Data: []byte("Subject: whatever\r\n\r\nplease stop\r\n")}
		require.NoError(t, in.Accept(ctx, m))
		list, err := storetest.InboundMessages(ctx, st, r.TeamID, 1)
		require.NoError(t, err)
		require.Len(t, list, 1)
		res, err := run[contract.ProcessInboundInput, contract.ProcessInboundResult](t,
			acts.ProcessInboundMessage, contract.ProcessInboundInput{InboundID: list[0].ID})
		require.NoError(t, err)
		return res
	}
	subscription := func(addr string, topic uuid.UUID) string {
		t.Helper()
		c, err := st.Audience.Contact(ctx, d.TeamID, store.ContactRef{Email: addr})
		if errors.Is(err, store.ErrNotFound) {
			return "no contact"
		}
		require.NoError(t, err)
		list, _, err := st.Audience.ContactTopics(ctx, d.TeamID, c.ID, store.Page{Limit: 100})
		require.NoError(t, err)
		for _, ct := range list {
			if ct.ID == topic {
				return ct.Subscription
			}
		}
		return "none"
	}

	text := "News"
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID, TopicID: &tp.ID,
		From: "Shop <hello@shop.test>", FromDomain: "shop.test", To: []string{"a@dest.test", "B@dest.test"},
		Subject: "News", Text: &text, LastEvent: store.EventQueued, CreatedAt: time.Now()}
	for _, r := range e.To {
		e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: "dest.test", Status: store.EventQueued})
	}
	_, err = storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	addr, err := mailto.Make(key, e.ID, 1, host)
	require.NoError(t, err)
	res := deliverTo(strings.ToUpper(addr)) // some MTAs change the case of local parts
	require.Equal(t, 1, res.Unsubscribed)
	require.Equal(t, store.TopicOptOut, subscription("B@dest.test", tp.ID))
	require.Equal(t, "no contact", subscription("a@dest.test", tp.ID), "only the address's own recipient")
	require.Equal(t, 1, deliverTo(addr).Unsubscribed, "again: counted, nothing changes")
	require.Equal(t, store.TopicOptOut, subscription("B@dest.test", tp.ID))

	// Without a topic: unsubscribed from everything.
	plain := domainEmail(t, st, d, "c@dest.test")
	addr, err = mailto.Make(key, plain.ID, 0, host)
	require.NoError(t, err)
	require.Equal(t, 1, deliverTo(addr).Unsubscribed)
	c, err := st.Audience.Contact(ctx, d.TeamID, store.ContactRef{Email: "c@dest.test"})
	require.NoError(t, err)
	require.True(t, c.Unsubscribed)
}
