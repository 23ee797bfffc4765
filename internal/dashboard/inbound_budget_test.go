package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/store"
)

// TestReceivingShowsInboundBudget: the Receiving page of a team near its
// inbound budget says so with the figures, and once it is reached, that
// its mail is refused; another team's page says nothing.
func TestReceivingShowsInboundBudget(t *testing.T) {
	t.Parallel()
	budget := inmail.Budget{DailyMessages: 5, StorageBytes: 1 << 20}
	f := newFixture(t, func(c *dashboard.Config) { c.InboundBudget = budget })
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	d := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Name: "in.example.test", Region: "us-east-1",
		Status: store.DomainVerified, ReturnPath: "send", TLS: store.TLSOpportunistic, DKIMSelector: "posthaste",
		DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: []byte("sealed"), Receiving: store.ReceivingEnabled}
	require.NoError(t, f.store.Domains.CreateDomain(ctx, d))
	in := store.NewInbound(f.store, nil)
	rt := inroute.New(f.store.Received, f.store.Emails, nil, nil)
	in.SetBudget(budget)
	receive := func() {
		r, err := rt.Route(ctx, "help@in.example.test")
		require.NoError(t, err)
		require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: "x@example.org",
			Recipients: []inmail.Recipient{{Address: "help@in.example.test", Route: r}}, ReceivedAt: time.Now(),
			Data: []byte("Subject: hi\r\n\r\nbody\r\n")}))
	}
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	for range 3 {
		receive()
	}
	_, page := get(t, c, f.srv.URL+"/dashboard/receiving")
	require.NotContains(t, page, `id="inbound-budget"`, "60%: nothing to say")

	receive()
	_, page = get(t, c, f.srv.URL+"/dashboard/receiving")
	require.Contains(t, page, `id="inbound-budget"`)
	require.Contains(t, page, "close to its inbound budget")
	require.Contains(t, page, "Today: 4 of 5 messages.")
	require.Contains(t, page, "of 1.0 MiB")

	receive()
	_, page = get(t, c, f.srv.URL+"/dashboard/receiving")
	require.Contains(t, page, "reached its inbound budget")
	require.Contains(t, page, "until the day ends (UTC)")
	require.Contains(t, page, "Today: 5 of 5 messages.")

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, page = get(t, cb, f.srv.URL+"/dashboard/receiving")
	require.NotContains(t, page, `id="inbound-budget"`, "team B is far from its budget")
}
