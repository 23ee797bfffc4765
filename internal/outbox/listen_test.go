package outbox

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// watchedListener passes the store's wake-ups on and counts them: woke
// counts notifications, listens the times it started listening (each also
// sent on listening).
type watchedListener struct {
	l         Listener
	woke      atomic.Int64
	listens   atomic.Int64
	listening chan struct{}
}

func newWatchedListener(l Listener) *watchedListener {
	return &watchedListener{l: l, listening: make(chan struct{}, 16)}
}

func (w *watchedListener) ListenOutbox(ctx context.Context, listening, woke func()) error {
	return w.l.ListenOutbox(ctx, func() {
		listening()
		w.listens.Add(1)
		w.listening <- struct{}{}
	}, func() {
		w.woke.Add(1)
		woke()
	})
}

func (w *watchedListener) waitListening(t *testing.T) {
	t.Helper()
	select {
	case <-w.listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the dispatcher never listened")
	}
}

// runDispatcher runs d until the test ends.
func runDispatcher(t *testing.T, d *Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// noPoll is a poll interval no test waits out: an entry started within a
// test was started because the dispatcher was woken.
const noPoll = time.Hour

// TestCommitElsewhereWakesTheDispatcher accepts an email through another
// pool on the database, as another process would, while the dispatcher
// polls only hourly: the commit's notification wakes it and the email's
// workflow starts.
func TestCommitElsewhereWakesTheDispatcher(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.NewWithURL(t)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	other, err := store.Open(ctx, store.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(other.Close)
	starter := newPoisonStarter(nil)
	wl := newWatchedListener(st.Webhooks)
	runDispatcher(t, New(Config{Poll: noPoll, Listener: wl}, st.Webhooks, starter, nil))
	wl.waitListening(t)

	id := acceptEmail(t, other, team)
	require.Eventually(t, func() bool { return starter.startedCount(id) == 1 }, 30*time.Second, 5*time.Millisecond,
		"the email's workflow starts without waiting for the poll")
	require.Positive(t, wl.woke.Load(), "a notification woke the dispatcher")
}

// TestDispatcherListensAgainAfterItsConnectionIsKilled terminates the
// listening session (as a restart of PostgreSQL or a network cut would):
// the dispatcher connects again and wakes for the next commit.
func TestDispatcherListensAgainAfterItsConnectionIsKilled(t *testing.T) {
	ctx := context.Background()
	st, pool, team := pgOutbox(t)
	starter := newPoisonStarter(nil)
	wl := newWatchedListener(st.Webhooks)
	runDispatcher(t, New(Config{Poll: noPoll, Listener: wl}, st.Webhooks, starter, nil))
	wl.waitListening(t)

	var killed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+store.OutboxChannel+`'`).Scan(&killed))
	require.Equal(t, 1, killed, "one listening session")
	wl.waitListening(t)

	id := acceptEmail(t, st, team)
	require.Eventually(t, func() bool { return starter.startedCount(id) == 1 }, 30*time.Second, 5*time.Millisecond,
		"the email's workflow starts without waiting for the poll")
	require.Positive(t, wl.woke.Load())
	require.EqualValues(t, 2, wl.listens.Load())
}

// failingListener never listens.
type failingListener struct{ calls atomic.Int64 }

func (f *failingListener) ListenOutbox(context.Context, func(), func()) error {
	f.calls.Add(1)
	return context.DeadlineExceeded
}

// TestDispatcherPollsWhileItCannotListen: without a listening connection
// the poll still starts entries.
func TestDispatcherPollsWhileItCannotListen(t *testing.T) {
	st, _, team := pgOutbox(t)
	starter := newPoisonStarter(nil)
	fl := &failingListener{}
	runDispatcher(t, New(Config{Poll: 20 * time.Millisecond, Listener: fl}, st.Webhooks, starter, nil))
	id := acceptEmail(t, st, team)
	require.Eventually(t, func() bool { return starter.startedCount(id) == 1 }, 30*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return fl.calls.Load() > 1 }, 30*time.Second, 5*time.Millisecond,
		"it keeps trying to listen")
}
