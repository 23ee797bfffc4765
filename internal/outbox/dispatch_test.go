package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// pgOutbox is a migrated store with one team, and a pool on its database
// for what the store has no query for.
func pgOutbox(t *testing.T) (*store.Store, *pgxpool.Pool, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	st, url := storetest.NewWithURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	return st, pool, team
}

func acceptEmail(t *testing.T, st *store.Store, team uuid.UUID) uuid.UUID {
	t.Helper()
	text := "t"
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
		FromDomain: "posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "s", Text: &text,
		LastEvent: store.EventQueued, CreatedAt: time.Now(),
		Recipients: []store.Recipient{{Address: "delivered@posthaste.test", Kind: "to", Domain: "posthaste.test",
			Status: store.EventQueued}}}
	_, err := storetest.InsertEmail(context.Background(), st, e)
	require.NoError(t, err)
	return e.ID
}

// poisonStarter fails the start of the refs in poison with err and
// records the other starts.
type poisonStarter struct {
	poison map[uuid.UUID]bool
	err    error

	mu      sync.Mutex
	started map[uuid.UUID]int
	tried   map[uuid.UUID]int
}

func newPoisonStarter(err error) *poisonStarter {
	return &poisonStarter{poison: map[uuid.UUID]bool{}, err: err, started: map[uuid.UUID]int{}, tried: map[uuid.UUID]int{}}
}

func (p *poisonStarter) Start(_ context.Context, it store.OutboxItem) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tried[it.Ref]++
	if p.poison[it.Ref] {
		return p.err
	}
	p.started[it.Ref]++
	return nil
}

func (p *poisonStarter) startedCount(ref uuid.UUID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started[ref]
}

// endings records Dispatcher.Ended.
type endings struct {
	mu  sync.Mutex
	got map[string]int
}

func (e *endings) record(kind, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.got == nil {
		e.got = map[string]int{}
	}
	e.got[kind+"/"+reason]++
}

// TestUnstartableEntriesDoNotHoldTheQueue queues 200 entries that cannot
// start ahead of a normal one (128 of them at the head once stopped
// dispatch for every team). The normal entry starts within two drains;
// the others end failed when the server refuses them for good, or wait
// for their next attempt when the failure may pass.
func TestUnstartableEntriesDoNotHoldTheQueue(t *testing.T) {
	refused := fmt.Errorf("starting workflow: %w: %w", ErrUnstartable,
		errors.New("InvalidArgument: WorkflowId length exceeds limit"))
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"refused for good", refused},
		{"failing for now", errors.New("starting workflow: context deadline exceeded")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, pool, team := pgOutbox(t)
			starter := newPoisonStarter(tc.err)
			var poison []uuid.UUID
			for range 200 {
				id := acceptEmail(t, st, team)
				starter.poison[id] = true
				poison = append(poison, id)
			}
			normal := acceptEmail(t, st, team)
			var ends endings
			d := New(Config{Batch: 128, RetryInitial: time.Hour, RetryMax: 2 * time.Hour}, st.Webhooks, starter, nil)
			d.Ended = ends.record

			n, err := d.Drain(ctx)
			require.NoError(t, err)
			require.Equal(t, 128, n, "the first drain claims the oldest entries: all unstartable")
			require.Zero(t, starter.startedCount(normal))
			n, err = d.Drain(ctx)
			require.NoError(t, err)
			require.Equal(t, 73, n)
			require.Equal(t, 1, starter.startedCount(normal), "the normal entry starts in the second drain")

			n, err = d.Drain(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "no entry is due: the unstartable ones are ended or wait")
			for _, id := range poison {
				require.Equal(t, 1, starter.tried[id], "tried once")
			}
			left, err := storetest.OutboxLen(ctx, st)
			require.NoError(t, err)

			if errors.Is(tc.err, ErrUnstartable) {
				require.Zero(t, left, "ended entries are deleted")
				require.Equal(t, map[string]int{"send_email/unstartable": 200}, ends.got)
				for _, id := range poison {
					e, err := st.Emails.GetEmail(ctx, team, id)
					require.NoError(t, err)
					require.Equal(t, store.EventFailed, e.LastEvent)
				}
				evs, err := st.Emails.Events(ctx, poison[0])
				require.NoError(t, err)
				require.Equal(t, reasonUnstartable, evs[len(evs)-1].Detail["reason"])
				return
			}
			require.Equal(t, 200, left)
			require.Empty(t, ends.got)
			var attempts, waiting int
			var lastError string
			require.NoError(t, pool.QueryRow(ctx, `SELECT min(attempts), count(*) FILTER (
					WHERE next_attempt_at > now() + interval '59 minutes'), min(last_error) FROM outbox`).
				Scan(&attempts, &waiting, &lastError))
			require.Equal(t, 1, attempts)
			require.Equal(t, 200, waiting, "each waits RetryInitial")
			require.Equal(t, tc.err.Error(), lastError)
			e, err := st.Emails.GetEmail(ctx, team, poison[0])
			require.NoError(t, err)
			require.Equal(t, store.EventQueued, e.LastEvent, "a failure that may pass fails no email")
		})
	}
}

func TestEntryGivesUpAfterTheWindow(t *testing.T) {
	ctx := context.Background()
	st, pool, team := pgOutbox(t)
	id := acceptEmail(t, st, team)
	starter := newPoisonStarter(errors.New("unavailable"))
	starter.poison[id] = true
	cfg := Config{RetryInitial: time.Millisecond, GiveUpAttempts: 2, GiveUpAfter: 24 * time.Hour}
	var ends endings

	// Young or with few attempts, the entry backs off.
	young := New(cfg, st.Webhooks, starter, nil)
	young.Ended = ends.record
	_, err := young.Drain(ctx)
	require.NoError(t, err)
	cfg.Now = func() time.Time { return time.Now().Add(25 * time.Hour) }
	old := New(cfg, st.Webhooks, starter, nil)
	old.Ended = ends.record
	_, err = pool.Exec(ctx, `UPDATE outbox SET next_attempt_at = now() - interval '1 second', attempts = 0`)
	require.NoError(t, err)
	_, err = old.Drain(ctx)
	require.NoError(t, err)
	left, err := storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 1, left, "old, but its first failure")
	require.Empty(t, ends.got)

	// Old and failed GiveUpAttempts times: ended.
	_, err = pool.Exec(ctx, `UPDATE outbox SET next_attempt_at = now() - interval '1 second'`)
	require.NoError(t, err)
	_, err = old.Drain(ctx)
	require.NoError(t, err)
	left, err = storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Zero(t, left)
	require.Equal(t, map[string]int{"send_email/gave_up": 1}, ends.got)
	evs, err := st.Emails.Events(ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.EventFailed, evs[len(evs)-1].Type)
	require.Equal(t, reasonGaveUp, evs[len(evs)-1].Detail["reason"])
}

func TestEntriesWithoutEmailsAreDropped(t *testing.T) {
	ctx := context.Background()
	st, pool, team := pgOutbox(t)
	normal := acceptEmail(t, st, team)
	gone := make([]uuid.UUID, 200)
	b := &pgx.Batch{}
	for i := range gone {
		gone[i] = uuid.New()
		kind := store.OutboxSendEmail
		if i%2 == 1 {
			kind = store.OutboxSendBatch
		}
		b.Queue(`INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @ref)`,
			pgx.NamedArgs{"kind": kind, "team": team, "ref": gone[i]})
	}
	require.NoError(t, pool.SendBatch(ctx, b).Close())
	starter := newPoisonStarter(nil)
	var ends endings
	d := New(Config{}, st.Webhooks, starter, nil)
	d.Ended = ends.record
	for range 2 {
		_, err := d.Drain(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, map[uuid.UUID]int{normal: 1}, starter.started, "nothing is started for a missing email")
	require.Equal(t, map[string]int{"send_email/missing": 100, "send_batch/missing": 100}, ends.got)
	left, err := storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Zero(t, left)
}
