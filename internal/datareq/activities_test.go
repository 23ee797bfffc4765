package datareq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

type fakeEraser struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeEraser) Erase(_ context.Context, team uuid.UUID, addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, team.String()+" "+addr)
	return nil
}

type fakeWaker struct {
	mu    sync.Mutex
	woken []uuid.UUID
}

func (f *fakeWaker) Wake(_ context.Context, ref store.EmailRef, at *time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.woken = append(f.woken, ref.ID)
	return nil
}

// An erasure cancels the scheduled email to the address (waking its
// workflow, whose Prepare then has nothing to send), erases the rest,
// hands the address to the history eraser and completes without keeping
// the address.
func TestEraseDataRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	eraser, waker := &fakeEraser{}, &fakeWaker{}
	acts := datareq.NewActivities(datareq.ActivitiesConfig{Eraser: eraser, Waker: waker},
		datareq.New(datareq.Config{Keys: box}, st))
	sending := delivery.New(delivery.Config{Keys: box}, st, nil, nil, nil)

	sent := acttest.InsertEmail(t, st, "kim@dest.test")
	team := sent.TeamID
	at := time.Now().Add(time.Hour)
	later := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "Acme <onboarding@posthaste.test>",
		FromDomain: "posthaste.test", To: []string{"Kim@dest.test"}, Subject: "Later", LastEvent: store.EventScheduled,
		ScheduledAt: &at, CreatedAt: time.Now(), Recipients: []store.Recipient{{Address: "Kim@dest.test", Kind: "to",
			Domain: "dest.test", Status: store.EventScheduled}}}
	_, err := storetest.InsertEmail(ctx, st, later)
	require.NoError(t, err)
	// Its workflow has started: the outbox is drained.
	_, err = st.Webhooks.DrainOutbox(ctx, 100, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
		out := make([]store.OutboxResult, len(items))
		for i, it := range items {
			out[i] = store.OutboxResult{ID: it.ID, Done: true}
		}
		return out
	})
	require.NoError(t, err)

	svc := datareq.New(datareq.Config{Keys: box}, st)
	r, err := svc.Create(ctx, team, store.DataRequestErasure, "KIM@dest.test", audit.Entry{ActorType: audit.ActorAdmin})
	require.NoError(t, err)
	in := contract.DataRequestInput{RequestID: r.ID}

	start, err := acttest.Run[contract.DataRequestInput, contract.StartDataRequestResult](t, acts.StartDataRequest, in)
	require.NoError(t, err)
	require.Equal(t, contract.StartDataRequestResult{Type: store.DataRequestErasure}, start)
	_, err = acttest.Run[contract.DataRequestInput, struct{}](t, acts.EraseDataRequest, in)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{later.ID}, waker.woken, "the scheduled email's workflow is woken")
	prep, err := acttest.Run[contract.PrepareInput, contract.PrepareResult](t, sending.Prepare,
		contract.PrepareInput{EmailID: later.ID.String()})
	require.NoError(t, err)
	require.True(t, prep.Skip, "the woken workflow finds nothing to send")
	_, err = acttest.Run[contract.DataRequestInput, struct{}](t, acts.EraseSubjectHistory, in)
	require.NoError(t, err)
	require.Equal(t, []string{team.String() + " kim@dest.test"}, eraser.calls)
	// A second pass (after the wait) changes no count.
	_, err = acttest.Run[contract.DataRequestInput, struct{}](t, acts.EraseDataRequest, in)
	require.NoError(t, err)
	_, err = acttest.Run[contract.FinishDataRequestInput, struct{}](t, acts.FinishDataRequest,
		contract.FinishDataRequestInput{RequestID: r.ID})
	require.NoError(t, err)

	done, err := st.Privacy.DataRequest(ctx, team, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.DataRequestCompleted, done.Status)
	require.Nil(t, done.Address, "a completed erasure forgets the address")
	require.Equal(t, 2, done.Found[store.ErasedEmails])
	require.Equal(t, 1, done.Found[store.CanceledEmails])
	_, err = st.Emails.GetEmail(ctx, team, sent.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	list, _, err := st.Privacy.ListAudit(ctx, team, audit.Filter{Action: audit.DataRequestComplete}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, audit.ActorSystem, list[0].ActorType)

	// Finishing again records nothing more.
	_, err = acttest.Run[contract.FinishDataRequestInput, struct{}](t, acts.FinishDataRequest,
		contract.FinishDataRequestInput{RequestID: r.ID})
	require.NoError(t, err)
	list, _, err = st.Privacy.ListAudit(ctx, team, audit.Filter{Action: audit.DataRequestComplete}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	// A rerun of the whole request finds it ended.
	start, err = acttest.Run[contract.DataRequestInput, contract.StartDataRequestResult](t, acts.StartDataRequest, in)
	require.NoError(t, err)
	require.True(t, start.Ended)
}

// An erasure stops the workflow of an email still being sent to the
// address and to someone else, cancels the address's recipient and
// restarts the email once, after the restart delay; the restarted
// Prepare hands out only the other recipient. A second pass restarts
// nothing more.
func TestEraseDataRequestInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	wf := &fakeWorkflows{running: map[wfRun]bool{}}
	acts := datareq.NewActivities(datareq.ActivitiesConfig{Eraser: &fakeEraser{}, Workflows: wf,
		RestartDelay: time.Minute}, datareq.New(datareq.Config{Keys: box}, st))
	sending := delivery.New(delivery.Config{Keys: box}, st, nil, nil, nil)

	e := store.Email{ID: uuid.Must(uuid.NewV7()), From: "Acme <onboarding@posthaste.test>",
		FromDomain: "posthaste.test", To: []string{"Kim@dest.test", "lee@dest.test"}, Subject: "Hi",
		LastEvent: store.EventQueued, CreatedAt: time.Now(), Recipients: []store.Recipient{
			{Address: "Kim@dest.test", Kind: "to", Domain: "dest.test", Status: store.EventQueued},
			{Address: "lee@dest.test", Kind: "to", Domain: "dest.test", Status: store.EventQueued}}}
	e.TeamID = acttest.InsertEmail(t, st, "someone@else.test").TeamID
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	startedAll(t, st)
	wf.running[wfRun{e.ID, 0}] = true

	r, err := datareq.New(datareq.Config{Keys: box}, st).Create(ctx, e.TeamID, store.DataRequestErasure,
		"kim@dest.test", audit.Entry{ActorType: audit.ActorAdmin})
	require.NoError(t, err)
	in := contract.DataRequestInput{RequestID: r.ID}
	_, err = acttest.Run[contract.DataRequestInput, contract.StartDataRequestResult](t, acts.StartDataRequest, in)
	require.NoError(t, err)
	_, err = acttest.Run[contract.DataRequestInput, struct{}](t, acts.EraseDataRequest, in)
	require.NoError(t, err)
	require.Len(t, wf.terminated, 1)
	require.Equal(t, e.ID, wf.terminated[0].ID)
	require.Len(t, wf.restarted, 1)
	require.Equal(t, 1, wf.restarted[0].Restarts)

	got, err := st.Emails.GetEmail(ctx, e.TeamID, e.ID)
	require.NoError(t, err)
	status := map[string]string{}
	for _, rc := range got.Recipients {
		status[rc.Address] = rc.Status
	}
	require.Equal(t, map[string]string{store.ErasedPlaceholder: store.EventCanceled,
		"lee@dest.test": store.EventQueued}, status)

	// A second pass: the restart runs, nothing is stopped or restarted again.
	_, err = acttest.Run[contract.DataRequestInput, struct{}](t, acts.EraseDataRequest, in)
	require.NoError(t, err)
	require.Len(t, wf.terminated, 1)
	require.Len(t, wf.restarted, 1)
	done, err := st.Privacy.DataRequest(ctx, e.TeamID, r.ID)
	require.NoError(t, err)
	require.Equal(t, 1, done.Found[store.InFlightEmails])

	// The restarted workflow's Prepare names only the other recipient.
	prep, err := acttest.Run[contract.PrepareInput, contract.PrepareResult](t, sending.Prepare,
		contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.False(t, prep.Skip)
	_, addrs := prep.PersonalData()
	require.Equal(t, []string{"lee@dest.test"}, addrs)
}

// The fixtures below are the few of the delivery activities' tests that the
// erasure tests need too.

func newBox(t *testing.T) *seal.Box {
	t.Helper()
	box, err := seal.New(make([]byte, 32))
	require.NoError(t, err)
	return box
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

// fakeWorkflows answers Running from a set of running (email, restart)
// pairs and records restarts and terminations, as Temporal would through
// worker.Starter.
type fakeWorkflows struct {
	mu         sync.Mutex
	running    map[wfRun]bool
	restarted  []store.EmailRef
	terminated []store.EmailRef
}

type wfRun struct {
	email    uuid.UUID
	restarts int
}

func (f *fakeWorkflows) Running(_ context.Context, ref store.EmailRef) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[wfRun{ref.ID, ref.Restarts}], nil
}

func (f *fakeWorkflows) Restart(_ context.Context, ref store.EmailRef, _ *time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restarted = append(f.restarted, ref)
	f.running[wfRun{ref.ID, ref.Restarts}] = true // a started workflow runs for a while
	return nil
}

func (f *fakeWorkflows) Terminate(_ context.Context, ref store.EmailRef, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated = append(f.terminated, ref)
	delete(f.running, wfRun{ref.ID, ref.Restarts})
	return nil
}
