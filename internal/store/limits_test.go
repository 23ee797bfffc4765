package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestQuotaTakeIsExactAndAtomicWithTheInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	plans, err := st.Accounts.Plans(ctx)
	require.NoError(t, err)
	require.Len(t, plans, 8)
	require.Equal(t, store.Plan{Name: "free", MonthlyEmails: 3000, PriceUSD: 0}, plans[0])
	require.Equal(t, store.Plan{Name: "2.5m", MonthlyEmails: 2_500_000, PriceUSD: 1050}, plans[7])

	rcpts := make([]string, 2995)
	for i := range rcpts {
		rcpts[i] = fmt.Sprintf("delivered+%d@posthaste.test", i)
	}
	used, err := storetest.InsertEmail(ctx, st, newEmail(team, rcpts...))
	require.NoError(t, err)
	require.EqualValues(t, 2995, used)

	// 50 parallel single-recipient inserts against 5 left: exactly 5 pass.
	ok, over := insertConcurrently(t, st, 50, 3000, func() store.Email { return newEmail(team, "delivered@posthaste.test") })
	require.Equal(t, 5, ok)
	require.Equal(t, 45, over)
	used, err = st.Accounts.QuotaUsed(ctx, team, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 3000, used)
	list, _, err := st.Emails.ListEmails(ctx, team, store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, list, 6, "a refused insert leaves no email behind")

	// A larger plan lets more through; a new month starts from zero.
	require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
	used, err = storetest.InsertEmail(ctx, st, newEmail(team, "a@posthaste.test", "b@posthaste.test"))
	require.NoError(t, err)
	require.EqualValues(t, 3002, used)
	next := newEmail(team, "a@posthaste.test")
	next.CreatedAt = time.Now().AddDate(0, 1, 0)
	used, err = storetest.InsertEmail(ctx, st, next)
	require.NoError(t, err)
	require.EqualValues(t, 1, used)

	require.ErrorIs(t, st.Accounts.SetPlan(ctx, team, "platinum"), store.ErrNotFound)
	require.ErrorIs(t, st.Accounts.SetPlan(ctx, uuid.New(), "free"), store.ErrNotFound)
	require.ErrorIs(t, st.Accounts.SetRateLimit(ctx, uuid.New(), 5), store.ErrNotFound)
}

func TestUseAPIKeyReturnsTheTeamRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	require.NoError(t, st.Accounts.CreateAPIKey(ctx, store.APIKey{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "k",
		Prefix: "ph_x", Hash: []byte("h"), Permission: store.PermissionSendingAccess}))
	k, err := st.Accounts.UseAPIKey(ctx, []byte("h"))
	require.NoError(t, err)
	require.Zero(t, k.TeamRateLimit)
	require.NoError(t, st.Accounts.SetRateLimit(ctx, team, 25))
	k, err = st.Accounts.UseAPIKey(ctx, []byte("h"))
	require.NoError(t, err)
	require.Equal(t, 25, k.TeamRateLimit)
	require.NoError(t, st.Accounts.SetRateLimit(ctx, team, 0))
	k, err = st.Accounts.UseAPIKey(ctx, []byte("h"))
	require.NoError(t, err)
	require.Zero(t, k.TeamRateLimit)
}

func TestRequestLogPartitionsAndRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	now := time.Now().UTC()
	old := now.AddDate(0, 0, -40)
	require.NoError(t, st.Insights.EnsureRequestLogPartitions(ctx, old, 3))
	require.NoError(t, st.Insights.EnsureRequestLogPartitions(ctx, now, 2))
	require.NoError(t, st.Insights.EnsureRequestLogPartitions(ctx, now, 2), "creating twice is harmless")
	days, err := storetest.RequestLogPartitions(ctx, st)
	require.NoError(t, err)
	require.Len(t, days, 5)

	entry := func(at time.Time) store.RequestLog {
		body := `{"a":1}`
		return store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &team, Method: "GET", Path: "/emails",
			Status: 200, ClientAddr: "127.0.0.1", Duration: 1500 * time.Microsecond, ResponseBody: &body, CreatedAt: at}
	}
	fresh := entry(now)
	require.NoError(t, st.Insights.InsertRequestLogs(ctx, []store.RequestLog{entry(old), entry(old.AddDate(0, 0, 1)), fresh}))
	got, err := st.Insights.GetRequestLog(ctx, team, fresh.ID)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Microsecond, got.Duration)
	require.Equal(t, `{"a":1}`, *got.ResponseBody)
	require.Nil(t, got.RequestBody)
	_, err = st.Insights.GetRequestLog(ctx, newTeam(t, st), fresh.ID)
	require.ErrorIs(t, err, store.ErrNotFound)

	// A day missing its partition is refused (the writer creates them).
	require.Error(t, st.Insights.InsertRequestLogs(ctx, []store.RequestLog{entry(now.AddDate(0, 0, 20))}))

	n, err := st.Insights.DropRequestLogsBefore(ctx, now.AddDate(0, 0, -30))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	days, err = storetest.RequestLogPartitions(ctx, st)
	require.NoError(t, err)
	require.Len(t, days, 2)
	list, _, err := st.Insights.ListRequestLogs(ctx, team, store.LogFilter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, fresh.ID, list[0].ID)
}

func TestPurgeEmailsOnlyThoseThatStoppedChanging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	longAgo := time.Now().AddDate(0, 0, -40)
	cutoff := time.Now().AddDate(0, 0, -30)

	insert := func(created time.Time, events ...store.Event) uuid.UUID {
		e := newEmail(team, "delivered@posthaste.test")
		e.CreatedAt = created
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, events))
		return e.ID
	}
	delivered := func(at time.Time) []store.Event {
		return []store.Event{{Type: store.EventSent, CreatedAt: at},
			{Type: store.EventDelivered, Recipient: "delivered@posthaste.test", CreatedAt: at}}
	}
	// Drain the outbox as the dispatcher would have.
	drain := func() {
		_, err := st.Webhooks.DrainOutbox(ctx, 1000, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
			ids := make([]store.OutboxResult, len(items))
			for i, it := range items {
				ids[i] = store.OutboxResult{ID: it.ID, Done: true}
			}
			return ids
		})
		require.NoError(t, err)
	}
	var oldDone []uuid.UUID
	for range 5 {
		oldDone = append(oldDone, insert(longAgo, delivered(longAgo)...))
	}
	recentDone := insert(longAgo, delivered(time.Now())...) // its last event is recent
	inFlight := insert(longAgo, store.Event{Type: store.EventSent, CreatedAt: longAgo})
	drain()
	neverStarted := insert(longAgo) // queued, still in the outbox

	total := 0
	for {
		n, err := st.Privacy.PurgeEmails(ctx, cutoff, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, n, 2, "bounded batches")
		total += n
		if n == 0 {
			break
		}
	}
	require.Equal(t, 5, total)
	for _, id := range oldDone {
		_, err := st.Emails.GetEmail(ctx, team, id)
		require.ErrorIs(t, err, store.ErrNotFound)
		evs, err := st.Emails.Events(ctx, id)
		require.NoError(t, err)
		require.Empty(t, evs, "events go with the email")
	}
	for _, id := range []uuid.UUID{recentDone, inFlight, neverStarted} {
		_, err := st.Emails.GetEmail(ctx, team, id)
		require.NoError(t, err)
	}

	// Nothing to expire on this schema: idempotency records live in a
	// table another migration adds; the sweep skips what does not exist.
	n, err := st.Privacy.PurgeExpired(ctx, time.Now(), 100)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestPurgeEmailsTakesFinishedWebhookMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	hook := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.example/x",
		Events: []string{"email.sent"}, Status: "enabled", Secret: []byte("sealed")}
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, hook))
	msg := func(status string) uuid.UUID {
		m := store.WebhookMessage{ID: uuid.Must(uuid.NewV7()), TeamID: team, WebhookID: hook.ID, Type: "email.sent",
			OrderKey: uuid.NewString(), Payload: []byte(`{}`), Status: status}
		require.NoError(t, st.Webhooks.InsertWebhookMessage(ctx, m))
		return m.ID
	}
	done, failed, pending := msg("success"), msg("failed"), msg("pending")

	// Everything finished before the cutoff goes; what still waits stays.
	n, err := st.Privacy.PurgeEmails(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, id := range []uuid.UUID{done, failed} {
		_, err := st.Webhooks.GetWebhookMessage(ctx, team, hook.ID, id)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	_, err = st.Webhooks.GetWebhookMessage(ctx, team, hook.ID, pending)
	require.NoError(t, err)
}

func TestSuppressedRecipientsDoNotCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	_, _, err := st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Email: "gone@example.com", Reason: "bounce"})
	require.NoError(t, err)
	used, err := storetest.InsertEmail(ctx, st, newEmail(team, "Gone@example.com", "here@example.com",
		"suppressed+x@posthaste.test", "delivered@posthaste.test"))
	require.NoError(t, err)
	require.EqualValues(t, 2, used, "only here@ and delivered@ count")
}

// A team has at most MaxWebhooksPerTeam endpoints, disabled ones included,
// even when creations race: the team's row is locked while they are
// counted. Other teams are not affected, and deleting one makes room.
func TestWebhookEndpointsPerTeamAreCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team, other := newTeam(t, st), newTeam(t, st)
	hook := func(team uuid.UUID, status string) store.Webhook {
		return store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.example/x",
			Events: []string{"email.sent"}, Status: status, Secret: []byte("sealed")}
	}
	var last uuid.UUID
	for i := range store.MaxWebhooksPerTeam - 3 {
		status := store.WebhookEnabled
		if i%2 == 1 {
			status = store.WebhookDisabled
		}
		w := hook(team, status)
		require.NoError(t, st.Webhooks.CreateWebhook(ctx, w))
		last = w.ID
	}

	// 20 parallel creations against 3 places: exactly 3 pass.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, over := 0, 0
	for range 20 {
		wg.Go(func() {
			err := st.Webhooks.CreateWebhook(ctx, hook(team, store.WebhookEnabled))
			mu.Lock()
			defer mu.Unlock()
			var le *store.LimitError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &le): // assert, not require: this is not the test's goroutine
				assert.ErrorIs(t, err, store.ErrLimitReached)
				assert.Equal(t, store.LimitError{What: "webhook endpoints", Max: store.MaxWebhooksPerTeam}, *le)
				over++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 3, ok)
	require.Equal(t, 17, over)
	list, _, err := st.Webhooks.ListWebhooks(ctx, team, store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, list, store.MaxWebhooksPerTeam)

	require.NoError(t, st.Webhooks.CreateWebhook(ctx, hook(other, store.WebhookEnabled)), "another team has its own count")
	require.NoError(t, st.Webhooks.DeleteWebhook(ctx, team, last, audit.Entry{}))
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, hook(team, store.WebhookEnabled)), "a deletion makes room")
	require.ErrorIs(t, st.Webhooks.CreateWebhook(ctx, hook(team, store.WebhookEnabled)), store.ErrLimitReached)
}

// The count and the insert of CreateWebhook are serialised per team: a
// creation that starts while another transaction holds the team and adds
// the last allowed endpoints waits for it, then sees them and is refused.
// (Counting without the team's lock would see 17 and make a 21st.)
func TestWebhookCapSerialisesCreations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, url := storetest.NewWithURL(t)
	team := newTeam(t, st)
	hook := func() store.Webhook {
		return store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.example/x",
			Events: []string{"email.sent"}, Status: store.WebhookEnabled, Secret: []byte("sealed")}
	}
	for range store.MaxWebhooksPerTeam - 3 {
		require.NoError(t, st.Webhooks.CreateWebhook(ctx, hook()))
	}

	// Another creation in progress: it holds the team and adds the last 3.
	holder, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // after commit a no-op
	_, err = tx.Exec(ctx, `SELECT 1 FROM team WHERE id = $1 FOR NO KEY UPDATE`, team)
	require.NoError(t, err)
	for range 3 {
		_, err = tx.Exec(ctx, `INSERT INTO webhook (id, team_id, endpoint, events, status, secret)
			VALUES ($1, $2, 'https://hooks.example/y', '{email.sent}', 'enabled', 'x')`, uuid.Must(uuid.NewV7()), team)
		require.NoError(t, err)
	}

	observer, err := pgx.Connect(ctx, url) // outside any transaction: fresh activity each time
	require.NoError(t, err)
	defer observer.Close(ctx)
	done := make(chan error, 1)
	go func() { done <- st.Webhooks.CreateWebhook(ctx, hook()) }()
	// Wait until the creation either finished (it did not wait for the
	// team) or waits for the holder's lock.
	var early error
	finished := false
	require.Eventually(t, func() bool {
		select {
		case early = <-done:
			finished = true
			return true
		default:
		}
		var waiting int
		err := observer.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, tx.Commit(ctx))
	if !finished {
		early = <-done
	}
	require.False(t, finished && early == nil, "the creation did not wait for the team and made a 21st endpoint")
	require.ErrorIs(t, early, store.ErrLimitReached)
}

// Acceptances of one team far from its limit take different slots of its
// usage and do not wait for each other's commits; near the limit a take
// that can no longer prove it fits is retried exactly, and exact takes
// wait for every take still uncommitted.
func TestQuotaTakesSpreadOverSlotsAndStayExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, url := storetest.NewWithURL(t)
	team := newTeam(t, st)
	require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
	month := store.QuotaMonth(time.Now())
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `INSERT INTO quota_usage (team_id, month, slot, used) VALUES ($1, $2, 7, 42000)`, team, month)
	require.NoError(t, err)

	// One uncommitted take of 500 on each of the 16 slots (a connection per
	// backend pid mod 16). None waits for another: with one usage row per
	// team the second would wait for the first's commit.
	holders := map[int]pgx.Tx{}
	for len(holders) < 16 {
		c, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer c.Close(ctx)
		var pid int
		require.NoError(t, c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		if _, taken := holders[pid%16]; taken {
			continue
		}
		tx, err := c.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // after commit a no-op
		_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`)
		require.NoError(t, err)
		var used int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT quota_take($1, $2, 500, false)`, team, month).Scan(&used))
		require.EqualValues(t, 42500, used, "the committed usage and this take")
		holders[pid%16] = tx
	}

	// An exact take waits for the uncommitted ones.
	_, err = admin.Exec(ctx, `SET lock_timeout = '10ms'`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT quota_take($1, $2, 1, true)`, team, month)
	require.ErrorContains(t, err, "lock timeout")
	_, err = admin.Exec(ctx, `SET lock_timeout = 0`)
	require.NoError(t, err)

	// An acceptance of one recipient fits by the committed usage, so it
	// starts on the fast path and waits for its slot's holder. Once all
	// 16 commit, the usage is at the limit: its fast take fails, it is
	// retried exactly and refused with the exact usage.
	done := make(chan error, 1)
	go func() {
		_, err := storetest.InsertEmail(ctx, st, newEmail(team, "delivered@posthaste.test"))
		done <- err
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%quota_take%')`).Scan(&waiting))
		return waiting
	}, time.Minute, 10*time.Millisecond, "the acceptance waits for its slot")
	for _, tx := range holders {
		require.NoError(t, tx.Commit(ctx))
	}
	err = <-done
	var qe *store.QuotaExceededError
	require.ErrorAs(t, err, &qe)
	require.EqualValues(t, 50000, qe.Used)
	used, err := st.Accounts.QuotaUsed(ctx, team, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 50000, used)

	// Across the boundary under concurrency: 7,510 left, 200 acceptances
	// of 40 recipients each; takes start fast and end exact, and exactly
	// 187 fit.
	require.NoError(t, st.Accounts.SetPlan(ctx, team, "100k"))
	_, err = admin.Exec(ctx, `UPDATE quota_usage SET used = used + 100000 - 7510 - 50000 WHERE team_id = $1 AND slot = 7`, team)
	require.NoError(t, err)
	rcpts := make([]string, 40)
	for i := range rcpts {
		rcpts[i] = fmt.Sprintf("delivered+%d@posthaste.test", i)
	}
	ok, over := insertConcurrently(t, st, 200, 100000, func() store.Email { return newEmail(team, rcpts...) })
	require.Equal(t, 187, ok)
	require.Equal(t, 13, over)
	used, err = st.Accounts.QuotaUsed(ctx, team, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 100000-7510+187*40, used)
}

// insertConcurrently inserts n emails made by email in parallel and
// counts those accepted and those refused over the quota, whose reported
// usage must not pass limit; any other error fails the test.
func insertConcurrently(t *testing.T, st *store.Store, n int, limit int64, email func() store.Email) (ok, over int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range n {
		wg.Go(func() {
			_, err := storetest.InsertEmail(context.Background(), st, email())
			mu.Lock()
			defer mu.Unlock()
			var qe *store.QuotaExceededError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &qe): // assert, not require: this is not the test's goroutine
				assert.ErrorIs(t, err, store.ErrQuotaExceeded)
				assert.LessOrEqual(t, qe.Used, limit)
				over++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	return ok, over
}
