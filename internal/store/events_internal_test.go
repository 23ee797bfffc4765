package store

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// commitCutter cancels the context of the statement after the first
// COMMIT that succeeds: what the caller would have done after the change
// committed (emitting its webhook event, before issue 34) never happens,
// as if the process died right after the commit.
type commitCutter struct {
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (c *commitCutter) arm(cancel context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel = cancel
}

func (c *commitCutter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c *commitCutter) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if d.Err != nil || !strings.EqualFold(d.CommandTag.String(), "COMMIT") {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
}

// TestEventsCommitWithTheirChange makes each change that reports itself
// to webhooks with its context cut right after its commit: its webhook
// message and the outbox entry that wakes the endpoint's delivery exist
// all the same, and the next drain of the outbox claims that entry.
func TestEventsCommitWithTheirChange(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabaseFrom(t, migratedTemplate))
	require.NoError(t, err)
	cutter := &commitCutter{}
	cfg.ConnConfig.Tracer = cutter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := &Store{pool: pool, logger: slog.New(slog.DiscardHandler),
		domainRecords: func(d Domain) any { return []string{"the records of " + d.Name} }}
	st.areas()

	team := uuid.New()
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: team, Name: "t"}))
	hook := uuid.New()
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, Webhook{ID: hook, TeamID: team, Endpoint: "https://hooks.test/x",
		Events: []string{"contact.created", "contact.updated", "contact.deleted", EventContactTopicsUpdated,
			"topic.created", "topic.updated", "topic.deleted", "domain.created", "domain.updated", "domain.deleted",
			EventSuppressionAdded, EventSuppressionRemoved},
		Status: WebhookEnabled, Secret: []byte("sealed")}))
	contact, topic, domain := uuid.New(), uuid.New(), uuid.New()
	segment, err := st.Audience.CreateSegment(ctx, Segment{ID: uuid.New(), TeamID: team, Name: "s"})
	require.NoError(t, err)
	name := "Renamed"
	sysEntry := audit.Entry{ActorType: audit.ActorSystem, Outcome: audit.Success}

	for _, c := range []struct {
		event  string
		change func(ctx context.Context) error
	}{
		{"contact.created", func(ctx context.Context) error {
			_, err := st.Audience.CreateContact(ctx, Contact{ID: contact, TeamID: team, Email: "pat@dest.test"}, nil, nil,
				"contact.created")
			return err
		}},
		{"contact.updated", func(ctx context.Context) error {
			_, err := st.Audience.UpdateContact(ctx, team, ContactRef{ID: &contact}, ContactUpdate{FirstName: &name},
				"contact.updated")
			return err
		}},
		{"contact.updated", func(ctx context.Context) error {
			return st.Audience.AddContactToSegment(ctx, team, contact, segment.ID, "contact.updated")
		}},
		{"contact.updated", func(ctx context.Context) error {
			return st.Audience.RemoveContactFromSegment(ctx, team, contact, segment.ID, "contact.updated")
		}},
		{"topic.created", func(ctx context.Context) error {
			_, err := st.Audience.CreateTopic(ctx, Topic{ID: topic, TeamID: team, Name: "news", DefaultSubscription: TopicOptIn,
				Visibility: "public"}, "topic.created")
			return err
		}},
		{EventContactTopicsUpdated, func(ctx context.Context) error {
			return st.Audience.UpdateContactTopics(ctx, team, contact, []TopicChoice{{TopicID: topic, Subscription: TopicOptOut}},
				EventContactTopicsUpdated)
		}},
		{"topic.updated", func(ctx context.Context) error {
			_, err := st.Audience.UpdateTopic(ctx, team, topic, TopicUpdate{Name: &name}, "topic.updated")
			return err
		}},
		{"topic.deleted", func(ctx context.Context) error {
			_, err := st.Audience.DeleteTopic(ctx, team, topic, "topic.deleted")
			return err
		}},
		{"contact.deleted", func(ctx context.Context) error {
			_, err := st.Audience.DeleteContact(ctx, team, ContactRef{ID: &contact}, "contact.deleted")
			return err
		}},
		{"domain.created", func(ctx context.Context) error {
			return st.Domains.CreateDomain(ctx, Domain{ID: domain, TeamID: team, Name: "dest.test", Region: "us-east-1",
				Status: DomainNotStarted, ReturnPath: "send", TLS: TLSOpportunistic, DKIMSelector: "posthaste",
				DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: []byte("sealed")}, "domain.created")
		}},
		{"domain.updated", func(ctx context.Context) error {
			yes := true
			return st.Domains.UpdateDomain(ctx, team, domain, DomainUpdate{OpenTracking: &yes}, audit.Entry{}, "domain.updated")
		}},
		{"domain.updated", func(ctx context.Context) error {
			return st.Domains.SetDomainStatus(ctx, domain, "verified", map[string]string{"dkim": "verified"}, "domain.updated")
		}},
		{"domain.deleted", func(ctx context.Context) error {
			return st.Domains.DeleteDomain(ctx, team, domain, audit.Entry{}, "domain.deleted")
		}},
		{EventSuppressionAdded, func(ctx context.Context) error { // a bounce's
			_, _, err := st.Emails.AddSuppression(ctx, Suppression{ID: uuid.New(), TeamID: team, Email: "gone@dest.test",
				Reason: SuppressionBounce})
			return err
		}},
		{EventSuppressionAdded, func(ctx context.Context) error { // by hand
			_, _, err := st.Emails.AddSuppressionBy(ctx, Suppression{ID: uuid.New(), TeamID: team, Email: "hand@dest.test",
				Reason: SuppressionManual}, sysEntry)
			return err
		}},
		{EventSuppressionAdded, func(ctx context.Context) error { // a batch
			_, err := st.Emails.AddSuppressionsBy(ctx, []Suppression{{ID: uuid.New(), TeamID: team, Email: "batch@dest.test",
				Reason: SuppressionManual}}, sysEntry)
			return err
		}},
		{EventSuppressionRemoved, func(ctx context.Context) error {
			_, err := st.Emails.DeleteSuppression(ctx, team, nil, "gone@dest.test", sysEntry)
			return err
		}},
		{EventSuppressionRemoved, func(ctx context.Context) error {
			_, err := st.Emails.DeleteSuppressionsBy(ctx, team, nil, []string{"hand@dest.test", "none@dest.test"}, sysEntry)
			return err
		}},
	} {
		_, err := pool.Exec(ctx, `DELETE FROM outbox`)
		require.NoError(t, err)
		var before int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_message`).Scan(&before))

		cctx, cancel := context.WithCancel(ctx)
		cutter.arm(cancel)
		require.NoError(t, c.change(cctx), c.event)
		require.Error(t, cctx.Err(), "%s: the context ends right after the commit", c.event)

		var typ string
		require.NoError(t, pool.QueryRow(ctx, `SELECT type FROM webhook_message ORDER BY seq DESC LIMIT 1`).Scan(&typ))
		var after int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_message`).Scan(&after))
		require.Equal(t, before+1, after, "%s: one message, committed with the change", c.event)
		require.Equal(t, c.event, typ)
		if strings.HasPrefix(c.event, "domain.") {
			var records []string
			require.NoError(t, pool.QueryRow(ctx, `SELECT payload->'data'->'records' FROM webhook_message
				ORDER BY seq DESC LIMIT 1`).Scan(&records))
			require.Equal(t, []string{"the records of dest.test"}, records, "%s carries the domain's records", c.event)
		}
		var claimed []OutboxItem
		_, err = st.Webhooks.DrainOutbox(ctx, 10, func(_ context.Context, items []OutboxItem) []OutboxResult {
			claimed = items
			return nil
		})
		require.NoError(t, err)
		require.Len(t, claimed, 1, c.event)
		require.Equal(t, OutboxWebhook, claimed[0].Kind)
		require.Equal(t, hook, claimed[0].Ref, "%s: the endpoint's delivery is woken", c.event)
	}
}

// TestEventForAWaitingEndpointStillNotifies: an endpoint that already has
// a wake-up waiting gets no second outbox entry, yet the commit still
// notifies, since a drain may have skipped the waiting entry while the
// event's transaction held it.
func TestEventForAWaitingEndpointStillNotifies(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabaseFrom(t, migratedTemplate)
	st := openURL(t, url)
	team, hook := uuid.New(), uuid.New()
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: team, Name: "t"}))
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, Webhook{ID: hook, TeamID: team, Endpoint: "https://hooks.test/x",
		Events: []string{"topic.created"}, Status: WebhookEnabled, Secret: []byte("sealed")}))
	_, err := st.pool.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @ref)`,
		pgx.NamedArgs{"kind": OutboxWebhook, "team": team, "ref": hook})
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+OutboxChannel)
	require.NoError(t, err)
	_, err = st.Audience.CreateTopic(ctx, Topic{ID: uuid.New(), TeamID: team, Name: "news", DefaultSubscription: TopicOptIn,
		Visibility: "public"}, "topic.created")
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	require.NoError(t, err, "the event's commit notifies")
	require.Equal(t, OutboxChannel, n.Channel)
	left, err := outboxLen(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 1, left, "the waiting wake-up serves the new message too")
}
