package store_test

import (
	"context"
	"errors"
	"net"
	"net/smtp"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/mxlisten"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// receivingDomain creates a verified domain of team with receiving on.
func receivingDomain(t *testing.T, st *store.Store, team uuid.UUID, name string) store.Domain {
	t.Helper()
	d := newDomain(team, name)
	d.Status, d.Receiving = store.DomainVerified, store.ReceivingEnabled
	require.NoError(t, st.Domains.CreateDomain(context.Background(), d))
	return d
}

func receivedMessage(d store.Domain, at time.Time, body string) inmail.Message {
	return inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: "x@sender.test", ReceivedAt: at,
		Recipients: []inmail.Recipient{{Address: "support@" + d.Name,
			Route: inmail.Route{Kind: inmail.RouteReceiving, TeamID: d.TeamID, DomainID: d.ID}}},
		Data: []byte("Subject: hi\r\n\r\n" + body)}
}

func TestInboundUsageCountsReceivedMail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	a, b := receivingDomain(t, st, teamA, "a.test"), receivingDomain(t, st, teamB, "b.test")
	in := store.NewInbound(st, nil)
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

	for _, m := range []inmail.Message{
		receivedMessage(a, now, "today"),                        // 20 bytes
		receivedMessage(a, now.Add(-time.Hour), "earlier"),      // 22
		receivedMessage(a, now.Add(-13*time.Hour), "yesterday"), // 24, another UTC day
		receivedMessage(a, now.AddDate(0, 0, -29), "kept"),      // 19, still kept
		receivedMessage(a, now.AddDate(0, 0, -30), "purged"),    // 21, retention deleted it
		receivedMessage(b, now, "team b"),
	} {
		require.NoError(t, in.Accept(ctx, m))
	}
	// A bounce to a return path of team A: not the receiving budget's.
	e, d := domainEmail(t, st, teamA, "shop.test", now, "a@dest.test")
	require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), ReceivedAt: now,
		Recipients: []inmail.Recipient{{Address: "bounces+x@send.shop.test",
			Route: inmail.Route{Kind: inmail.RouteReturnPath, TeamID: teamA, DomainID: d.ID, EmailID: e.ID}}},
		Data: []byte(strings.Repeat("x", 1000))}))

	u, err := st.Received.InboundUsage(ctx, teamA, now)
	require.NoError(t, err)
	require.Equal(t, inmail.Usage{Messages: 2, Bytes: 20 + 22 + 24 + 19}, u)
	u, err = st.Received.InboundUsage(ctx, teamB, now)
	require.NoError(t, err)
	require.Equal(t, inmail.Usage{Messages: 1, Bytes: 21}, u)

	// A team's own budget comes with its usage.
	require.NoError(t, storetest.SetInboundBudget(ctx, st, teamB, 5, 1<<20))
	u, err = st.Received.InboundUsage(ctx, teamB, now)
	require.NoError(t, err)
	require.Equal(t, inmail.Usage{Messages: 1, Bytes: 21, MaxMessages: 5, MaxBytes: 1 << 20}, u)
	// A storage budget beyond 2 GiB (a bigint, not an integer).
	require.NoError(t, storetest.SetInboundBudget(ctx, st, teamB, 5, 5<<30))
	u, err = st.Received.InboundUsage(ctx, teamB, now)
	require.NoError(t, err)
	require.Equal(t, inmail.Usage{Messages: 1, Bytes: 21, MaxMessages: 5, MaxBytes: 5 << 30}, u)

	// The counters outlive nothing: purged once outside the window.
	_, err = st.Privacy.PurgeExpired(ctx, now.AddDate(0, 0, 40), 1000)
	require.NoError(t, err)
	u, err = st.Received.InboundUsage(ctx, teamA, now)
	require.NoError(t, err)
	require.Equal(t, inmail.Usage{}, u)
}

func TestInboundAcceptRefusesOverBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	a, b := receivingDomain(t, st, teamA, "a.test"), receivingDomain(t, st, teamB, "b.test")
	in := store.NewInbound(st, nil)
	in.SetBudget(inmail.Budget{DailyMessages: 3, StorageBytes: 1 << 20})
	now := time.Now()

	// Racing accepts for team A: the budget's 3 are taken, no more.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, over int
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := in.Accept(ctx, receivedMessage(a, now, "race"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, inmail.ErrOverBudget):
				over++
			default:
				t.Errorf("accept: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 3, ok)
	require.Equal(t, 5, over)
	msgs, err := storetest.InboundMessages(ctx, st, teamA, 100)
	require.NoError(t, err)
	require.Len(t, msgs, 3, "nothing of a refused message is kept")
	u, err := st.Received.InboundUsage(ctx, teamA, now)
	require.NoError(t, err)
	require.Equal(t, int64(3), u.Messages, "nor counted")

	// Team B still receives; and a team's own budget replaces the default.
	require.NoError(t, in.Accept(ctx, receivedMessage(b, now, "b")))
	require.NoError(t, storetest.SetInboundBudget(ctx, st, teamA, 4, 0))
	require.NoError(t, in.Accept(ctx, receivedMessage(a, now, "a")))
	require.ErrorIs(t, in.Accept(ctx, receivedMessage(a, now, "a")), inmail.ErrOverBudget)

	// Bytes: a message that would go over the storage budget is refused.
	require.NoError(t, storetest.SetInboundBudget(ctx, st, teamB, 100, 200))
	require.ErrorIs(t, in.Accept(ctx, receivedMessage(b, now, strings.Repeat("x", 200))), inmail.ErrOverBudget)
	require.NoError(t, in.Accept(ctx, receivedMessage(b, now, strings.Repeat("x", 100))))
}

// TestInboundBudgetAtTheMX runs the inbound MX on loopback on the store:
// once a team's receiving domains took their day's budget, a recipient of
// that team is refused at RCPT with a 4xx, while another team still
// receives.
func TestInboundBudgetAtTheMX(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	receivingDomain(t, st, teamA, "a.test")
	receivingDomain(t, st, teamB, "b.test")
	in := store.NewInbound(st, nil)
	budget := inmail.Budget{DailyMessages: 2, StorageBytes: 1 << 30, Usage: st.Received}
	in.SetBudget(budget)
	srv, err := mxlisten.New(mxlisten.Config{Hostname: "mx.test", Budget: budget, Resolver: &net.Resolver{
		PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no DNS in this test")
		}}}, inroute.New(st.Received, st.Emails, nil, nil), in)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})

	c, err := smtp.Dial(ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("client.test"))
	send := func(rcpt string) error {
		if err := c.Mail("x@sender.test"); err != nil {
			return err
		}
		if err := c.Rcpt(rcpt); err != nil {
			_ = c.Reset()
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		_, _ = w.Write([]byte("Subject: hi\r\n\r\nhello\r\n"))
		return w.Close()
	}
	require.NoError(t, send("support@a.test"))
	require.NoError(t, send("sales@a.test"))
	err = send("support@a.test")
	var te *textproto.Error
	require.ErrorAs(t, err, &te, "the third of team A's day")
	require.Equal(t, 452, te.Code, te.Msg)
	require.NoError(t, send("support@b.test"), "team B still receives")

	msgs, err := storetest.InboundMessages(context.Background(), st, teamA, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
}

// Messages for the same two teams, their recipients in either order,
// accepted at once: each is counted for both teams, and none fails on a
// deadlock of the teams' day counters.
func TestInboundUsageOfTwoTeamsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	a, b := receivingDomain(t, st, teamA, "a.test"), receivingDomain(t, st, teamB, "b.test")
	in := store.NewInbound(st, nil)
	now := time.Now()
	const n = 24
	errs := make(chan error, n)
	for i := range n {
		m := receivedMessage(a, now, "both")
		m.Recipients = append(m.Recipients, receivedMessage(b, now, "").Recipients...)
		if i%2 == 1 {
			m.Recipients[0], m.Recipients[1] = m.Recipients[1], m.Recipients[0]
		}
		go func() { errs <- in.Accept(ctx, m) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	for _, team := range []uuid.UUID{teamA, teamB} {
		u, err := st.Received.InboundUsage(ctx, team, now)
		require.NoError(t, err)
		require.Equal(t, int64(n), u.Messages)
	}
}
