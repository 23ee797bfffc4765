package delivery_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// fakeWorkflows answers Running from a set of running (email, restart)
// pairs and records restarts, as Temporal would through worker.Starter.
type fakeWorkflows struct {
	mu        sync.Mutex
	running   map[wfRun]bool
	broken    map[uuid.UUID]bool // Running fails for these emails
	asked     []store.EmailRef
	restarted []store.EmailRef
}

type wfRun struct {
	email    uuid.UUID
	restarts int
}

func (f *fakeWorkflows) Running(_ context.Context, ref store.EmailRef) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ref)
	if f.broken[ref.ID] {
		return false, errors.New("temporal unavailable")
	}
	return f.running[wfRun{ref.ID, ref.Restarts}], nil
}

func (f *fakeWorkflows) Restart(_ context.Context, ref store.EmailRef, _ *time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restarted = append(f.restarted, ref)
	f.running[wfRun{ref.ID, ref.Restarts}] = true // a started workflow runs for a while
	return nil
}

func (f *fakeWorkflows) finish(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for r := range f.running {
		if r.email == id {
			delete(f.running, r)
		}
	}
}

// startedAll deletes every outbox entry, as the dispatcher does once the
// workflows started.
func startedAll(t *testing.T, st *store.Store) {
	t.Helper()
	_, err := st.Webhooks.DrainOutbox(context.Background(), 1000, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
		var res []store.OutboxResult
		for _, it := range items {
			res = append(res, store.OutboxResult{ID: it.ID, Done: true})
		}
		return res
	})
	require.NoError(t, err)
}

func reasonOf(t *testing.T, st *store.Store, id uuid.UUID) (string, any) {
	t.Helper()
	evs, err := st.Emails.Events(context.Background(), id)
	require.NoError(t, err)
	last := evs[len(evs)-1]
	return last.Type, last.Detail["reason"]
}

func TestReconcileRestartsThenFailsQueuedEmails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	wf := &fakeWorkflows{running: map[wfRun]bool{}}
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	acts := delivery.NewReconciler(delivery.ReconcilerConfig{Workflows: wf, Metrics: metrics}, st.Emails)
	now := time.Now()
	stuck := insertEmailAt(t, st, now.Add(-time.Hour), "delivered@posthaste.test")
	recent := insertEmailAt(t, st, now, "delivered@posthaste.test")
	startedAll(t, st)
	waiting := insertEmailAt(t, st, now.Add(-time.Hour), "delivered@posthaste.test") // its start is still in the outbox
	in := contract.ReconcileInput{QueuedBefore: now.Add(-10 * time.Minute), SentBefore: now.Add(-73 * time.Hour),
		MaxRestarts: 2, Limit: 100}
	reconcile := func() contract.ReconcileResult {
		t.Helper()
		res, err := run[contract.ReconcileInput, contract.ReconcileResult](t, acts.ReconcileEmails, in)
		require.NoError(t, err)
		return res
	}

	// The first workflow ended without sending: restart 1.
	require.Equal(t, contract.ReconcileResult{Examined: 1, Restarted: 1}, reconcile())
	require.Equal(t, []store.EmailRef{{ID: stuck.ID, TeamID: stuck.TeamID}}, wf.asked,
		"Temporal is asked about the email's first workflow only")
	require.Equal(t, []store.EmailRef{{ID: stuck.ID, TeamID: stuck.TeamID, Restarts: 1}}, wf.restarted)

	// While the restart runs, the email is left alone.
	require.Equal(t, contract.ReconcileResult{Examined: 1, Running: 1}, reconcile())
	require.Equal(t, 1, wf.asked[1].Restarts, "the restart is what is asked about now")

	// The restart ended too: restart 2, then no more.
	wf.finish(stuck.ID)
	require.Equal(t, contract.ReconcileResult{Examined: 1, Restarted: 1}, reconcile())
	require.Equal(t, 2, wf.restarted[1].Restarts)
	wf.finish(stuck.ID)
	require.Equal(t, contract.ReconcileResult{Examined: 1, Failed: 1}, reconcile())
	typ, reason := reasonOf(t, st, stuck.ID)
	require.Equal(t, store.EventFailed, typ)
	require.Equal(t, delivery.ReasonNotStarted, reason)
	require.Equal(t, contract.ReconcileResult{}, reconcile(), "a failed email has its outcome")
	require.Len(t, wf.restarted, 2)

	require.Equal(t, 2.0, testutil.ToFloat64(metrics.Reconciled.WithLabelValues(delivery.ReconcileRestarted)))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.Reconciled.WithLabelValues(delivery.ReconcileFailed)))
	for _, e := range []store.Email{recent, waiting} {
		got, err := st.Emails.GetEmail(ctx, e.TeamID, e.ID)
		require.NoError(t, err)
		require.Equal(t, store.EventQueued, got.LastEvent, "young or waiting in the outbox: not the reconciler's")
	}
}

func TestReconcileFailsEmailsPastTheDeliveryWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	wf := &fakeWorkflows{running: map[wfRun]bool{}, broken: map[uuid.UUID]bool{}}
	acts := delivery.NewReconciler(delivery.ReconcilerConfig{Workflows: wf}, st.Emails)
	now := time.Now()
	sent := func(at time.Time, rcpts ...string) store.Email {
		e := insertEmailAt(t, st, at, rcpts...)
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventSent}}))
		return e
	}
	gone := sent(now.Add(-100*time.Hour), "delivered@posthaste.test", "a@one.test")
	require.NoError(t, st.Emails.RecordEvents(ctx, gone.ID, []store.Event{
		{Type: store.EventDelivered, Recipient: "delivered@posthaste.test"}}))
	stillRunning := sent(now.Add(-99*time.Hour), "a@one.test")
	wf.running[wfRun{stillRunning.ID, 0}] = true
	unknown := sent(now.Add(-98*time.Hour), "a@one.test")
	wf.broken[unknown.ID] = true
	inWindow := sent(now.Add(-time.Hour), "a@one.test")
	startedAll(t, st)

	res, err := run[contract.ReconcileInput, contract.ReconcileResult](t, acts.ReconcileEmails,
		contract.ReconcileInput{QueuedBefore: now.Add(-10 * time.Minute), SentBefore: now.Add(-73 * time.Hour),
			MaxRestarts: 3, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, contract.ReconcileResult{Examined: 3, Running: 1, Failed: 1, Errors: 1}, res)
	require.Empty(t, wf.restarted, "a sent email is never sent again")
	got, err := st.Emails.GetEmail(ctx, gone.TeamID, gone.ID)
	require.NoError(t, err)
	status := map[string]string{}
	for _, r := range got.Recipients {
		status[r.Address] = r.Status
	}
	require.Equal(t, map[string]string{"delivered@posthaste.test": "delivered", "a@one.test": "failed"}, status,
		"only the recipient without an outcome fails")
	typ, reason := reasonOf(t, st, gone.ID)
	require.Equal(t, store.EventFailed, typ)
	require.Equal(t, delivery.ReasonNoOutcome, reason)
	for _, e := range []store.Email{stillRunning, unknown, inWindow} {
		got, err := st.Emails.GetEmail(ctx, e.TeamID, e.ID)
		require.NoError(t, err)
		require.Equal(t, store.EventSent, got.LastEvent)
	}
}

func TestReconcileBoundsItsWork(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	wf := &fakeWorkflows{running: map[wfRun]bool{}}
	acts := delivery.NewReconciler(delivery.ReconcilerConfig{Workflows: wf}, st.Emails)
	now := time.Now()
	for i := range 5 {
		e := insertEmailAt(t, st, now.Add(-time.Hour-time.Duration(i)*time.Minute), "delivered@posthaste.test")
		wf.running[wfRun{e.ID, 0}] = true
	}
	startedAll(t, st)
	in := contract.ReconcileInput{QueuedBefore: now, SentBefore: now.Add(-73 * time.Hour), MaxRestarts: 3, Limit: 3}
	res, err := run[contract.ReconcileInput, contract.ReconcileResult](t, acts.ReconcileEmails, in)
	require.NoError(t, err)
	require.Equal(t, contract.ReconcileResult{Examined: 3, Running: 3}, res)

	// Without a Temporal client there is nothing to reconcile with.
	_, err = run[contract.ReconcileInput, contract.ReconcileResult](t,
		delivery.NewReconciler(delivery.ReconcilerConfig{}, st.Emails).ReconcileEmails, in)
	require.ErrorContains(t, err, "no Temporal client")
}
