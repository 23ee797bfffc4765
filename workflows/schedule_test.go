package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

func newBatchEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(SendBatch, workflow.RegisterOptions{Name: SendBatchName})
	env.RegisterActivityWithOptions(sendingActs.LoadBatch, activity.RegisterOptions{Name: contract.LoadBatchName})
	return env
}

// schedule plays PostgreSQL for Prepare: each email's current time and
// state, and when it was claimed.
type schedule struct {
	mu       sync.Mutex
	env      *testsuite.TestWorkflowEnvironment
	at       map[string]time.Time
	canceled map[string]bool
	claimed  map[string]time.Time
}

func newSchedule(env *testsuite.TestWorkflowEnvironment) *schedule {
	s := &schedule{env: env, at: map[string]time.Time{}, canceled: map[string]bool{}, claimed: map[string]time.Time{}}
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.PrepareInput) (contract.PrepareResult, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.prepare(in.EmailID), nil
		})
	env.OnActivity(contract.PrepareBatchName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.PrepareBatchInput) (contract.PrepareBatchResult, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			var res contract.PrepareBatchResult
			for _, id := range in.EmailIDs {
				res.Emails = append(res.Emails, contract.PreparedEmail{EmailID: id, Result: s.prepare(id)})
			}
			return res, nil
		})
	return s
}

// prepare claims the email if it is due, as Prepare does; s.mu is held.
func (s *schedule) prepare(id string) contract.PrepareResult {
	now := s.env.Now()
	if s.canceled[id] {
		return contract.PrepareResult{Skip: true}
	}
	if at, ok := s.at[id]; ok && at.After(now) {
		return contract.PrepareResult{NotDue: &at}
	}
	s.claimed[id] = now
	return contract.PrepareResult{Sandbox: []contract.SandboxRecipient{
		{Address: "delivered@posthaste.test", Events: []string{"delivered"}}}}
}

func (s *schedule) set(id string, at time.Time) { s.mu.Lock(); s.at[id] = at; s.mu.Unlock() }
func (s *schedule) cancel(id string)            { s.mu.Lock(); s.canceled[id] = true; s.mu.Unlock() }
func (s *schedule) claimedAt(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.claimed[id]
	return t, ok
}

func TestSendEmailRescheduledEarlierIsWokenBySignal(t *testing.T) {
	env := newEnv(t)
	start := env.Now()
	sched := newSchedule(env)
	orig, moved := start.Add(2*time.Hour), start.Add(time.Hour)
	sched.set("e1", orig)
	recorded(env)
	env.RegisterDelayedCallback(func() {
		sched.set("e1", moved)
		env.SignalWorkflow(WakeSignal, Wake{EmailID: "e1", ScheduledAt: &moved})
	}, 10*time.Minute)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", ScheduledAt: &orig, Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	at, ok := sched.claimedAt("e1")
	require.True(t, ok)
	require.False(t, at.Before(moved), "claimed at %v, moved to %v", at, moved)
	require.True(t, at.Before(orig), "claimed at %v, after the old time %v", at, orig)
}

func TestSendEmailRescheduledLaterWaitsAgain(t *testing.T) {
	env := newEnv(t)
	start := env.Now()
	sched := newSchedule(env)
	orig, later := start.Add(time.Hour), start.Add(5*time.Hour)
	// Moved later before the workflow woke: no signal is needed, Prepare
	// reports the new time.
	sched.set("e1", later)
	recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", ScheduledAt: &orig, Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	at, ok := sched.claimedAt("e1")
	require.True(t, ok)
	require.False(t, at.Before(later), "claimed at %v, rescheduled to %v", at, later)
}

func TestSendEmailCanceledWhileWaitingEndsEarly(t *testing.T) {
	env := newEnv(t)
	start := env.Now()
	sched := newSchedule(env)
	orig := start.Add(24 * time.Hour)
	sched.set("e1", orig)
	env.RegisterDelayedCallback(func() {
		sched.cancel("e1")
		env.SignalWorkflow(WakeSignal, Wake{EmailID: "e1"})
	}, time.Minute)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", ScheduledAt: &orig, Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	_, ok := sched.claimedAt("e1")
	require.False(t, ok, "a canceled email is not sent")
	require.True(t, env.Now().Before(orig), "the workflow ended at %v, not at the old time", env.Now())
	env.AssertNotCalled(t, contract.RecordEventsName, mock.Anything, mock.Anything)
}

func TestSendBatchSendsEveryEmailOnItsOwnSchedule(t *testing.T) {
	env := newBatchEnv(t)
	start := env.Now()
	sched := newSchedule(env)
	later, earlier := start.Add(3*time.Hour), start.Add(30*time.Minute)
	sched.set("b", later)
	sched.set("c", later)
	env.OnActivity(contract.LoadBatchName, mock.Anything, contract.LoadBatchInput{BatchID: "batch1"}).Return(
		contract.LoadBatchResult{Emails: []contract.BatchEmail{
			{EmailID: "a"}, {EmailID: "b", ScheduledAt: &later}, {EmailID: "c", ScheduledAt: &later},
			{EmailID: "d"},
		}}, nil)
	events := recorded(env)
	env.RegisterDelayedCallback(func() {
		sched.set("b", earlier)
		env.SignalWorkflow(WakeSignal, Wake{EmailID: "b", ScheduledAt: &earlier})
		sched.cancel("c")
		env.SignalWorkflow(WakeSignal, Wake{EmailID: "c"})
		env.SignalWorkflow(WakeSignal, Wake{EmailID: "unknown"})
	}, 5*time.Minute)
	env.ExecuteWorkflow(SendBatchName, SendBatchInput{BatchID: "batch1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	for _, id := range []string{"a", "d"} {
		at, ok := sched.claimedAt(id)
		require.True(t, ok, id)
		require.Equal(t, start, at, "%s is sent at once", id)
	}
	at, ok := sched.claimedAt("b")
	require.True(t, ok)
	require.False(t, at.Before(earlier))
	require.True(t, at.Before(later))
	_, ok = sched.claimedAt("c")
	require.False(t, ok, "the canceled email of the batch is not sent")
	require.Len(t, *events, 3, "one sandbox outcome per sent email")
}
