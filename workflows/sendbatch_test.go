package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

func TestSendBatchPreparesDueEmailsTogether(t *testing.T) {
	env := newBatchEnv(t)
	start := env.Now()
	team := uuid.New()
	later, moved := start.Add(time.Hour), start.Add(30*time.Minute)
	env.OnActivity(contract.LoadBatchName, mock.Anything, mock.Anything).Return(contract.LoadBatchResult{Emails: []contract.BatchEmail{
		{EmailID: "a"}, {EmailID: "b", ScheduledAt: &later}, {EmailID: "c"}, {EmailID: "d"}, {EmailID: "e"}, {EmailID: "f"},
		{EmailID: "g"},
	}}, nil)
	var batches []contract.PrepareBatchInput
	env.OnActivity(contract.PrepareBatchName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.PrepareBatchInput) (contract.PrepareBatchResult, error) {
			batches = append(batches, in)
			return contract.PrepareBatchResult{TeamID: team, Emails: []contract.PreparedEmail{
				{EmailID: "a", Result: contract.PrepareResult{Sandbox: []contract.SandboxRecipient{
					{Address: "delivered@posthaste.test", Events: []string{"delivered"}}}}},
				{EmailID: "c", Result: contract.PrepareResult{
					Sandbox: []contract.SandboxRecipient{{Address: "complained@posthaste.test", Events: []string{"delivered", "complained"}}},
					Groups: []contract.DeliveryGroup{{Domain: "x.test", Region: "us-east-1",
						Recipients: []string{"y@x.test", "z@x.test"}}}}},
				{EmailID: "d", Failed: "building message: bad header"},
				{EmailID: "e", Alone: true},
				{EmailID: "f", Result: contract.PrepareResult{Skip: true}},
				{EmailID: "g", Result: contract.PrepareResult{NotDue: &moved}},
			}}, nil
		})
	var mu sync.Mutex
	alone := map[string]time.Time{}
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.PrepareInput) (contract.PrepareResult, error) {
			mu.Lock()
			defer mu.Unlock()
			alone[in.EmailID] = env.Now()
			return contract.PrepareResult{TeamID: team, Sandbox: []contract.SandboxRecipient{
				{Address: "delivered+" + in.EmailID + "@posthaste.test", Events: []string{"delivered"}}}}, nil
		})
	var delivered []contract.DeliverInput
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) error {
			mu.Lock()
			defer mu.Unlock()
			delivered = append(delivered, in)
			return temporal.NewNonRetryableApplicationError("the message is gone", contract.ErrTypePermanent, nil)
		})
	var failed []contract.FailEmailInput
	env.OnActivity(contract.FailEmailName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.FailEmailInput) error {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, in)
			return nil
		})
	var together []contract.RecordBatchEventsInput
	env.OnActivity(contract.RecordBatchEventsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RecordBatchEventsInput) error {
			mu.Lock()
			defer mu.Unlock()
			together = append(together, in)
			return nil
		})
	var own []contract.RecordEventsInput
	env.OnActivity(contract.RecordEventsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RecordEventsInput) error {
			mu.Lock()
			defer mu.Unlock()
			own = append(own, in)
			return nil
		})

	env.ExecuteWorkflow(SendBatchName, SendBatchInput{BatchID: "batch1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Equal(t, []contract.PrepareBatchInput{{EmailIDs: []string{"a", "c", "d", "e", "f", "g"}}}, batches,
		"the emails due at the start are prepared together, once")
	require.Equal(t, map[string]time.Time{"e": start, "g": moved, "b": later}, alone,
		"left alone: prepared at once; moved later: then; scheduled later: at its time")
	require.Equal(t, []contract.FailEmailInput{{EmailID: "d", Reason: "building message: bad header"}}, failed)
	require.Len(t, delivered, 1)
	require.Equal(t, contract.DeliverInput{EmailID: "c", TeamID: team, Domain: "x.test",
		Recipients: []string{"y@x.test", "z@x.test"}}, delivered[0], "the prepared email's group is delivered with its team")

	require.Equal(t, []contract.RecordBatchEventsInput{{TeamID: team, Emails: []contract.RecordEventsInput{
		{EmailID: "a", Events: []contract.EventInput{{Type: "delivered", Recipient: "delivered@posthaste.test"}}},
		{EmailID: "c", Events: []contract.EventInput{{Type: "delivered", Recipient: "complained@posthaste.test"},
			sandboxEvent("complained@posthaste.test", "complained")}},
	}}}, together, "the sandbox outcomes of the emails prepared together are recorded together")
	byEmail := map[string][]string{}
	for _, in := range own {
		require.Equal(t, team, in.TeamID)
		for _, e := range in.Events {
			byEmail[in.EmailID] = append(byEmail[in.EmailID], e.Type+":"+e.Recipient)
		}
	}
	require.Equal(t, map[string][]string{
		"b": {"delivered:delivered+b@posthaste.test"},
		"e": {"delivered:delivered+e@posthaste.test"},
		"g": {"delivered:delivered+g@posthaste.test"},
		"c": {"failed:y@x.test", "failed:z@x.test"},
	}, byEmail, "the emails sent alone record their own outcomes, and so does a prepared email's failed delivery")
}

// Histories recorded before emails were prepared together replay the
// steps of SendEmail for every email of the batch.
func TestSendBatchBeforePrepareBatchSendsEveryEmailAlone(t *testing.T) {
	env := newBatchEnv(t)
	env.OnGetVersion(batchPrepareChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	sched := newSchedule(env)
	env.OnActivity(contract.LoadBatchName, mock.Anything, mock.Anything).Return(contract.LoadBatchResult{
		Emails: []contract.BatchEmail{{EmailID: "a"}, {EmailID: "b"}}}, nil)
	events := recorded(env)
	env.ExecuteWorkflow(SendBatchName, SendBatchInput{BatchID: "batch1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	env.AssertNotCalled(t, contract.PrepareBatchName, mock.Anything, mock.Anything)
	env.AssertNotCalled(t, contract.RecordBatchEventsName, mock.Anything, mock.Anything)
	for _, id := range []string{"a", "b"} {
		_, ok := sched.claimedAt(id)
		require.True(t, ok, id)
	}
	require.Len(t, *events, 2)
}

// A database outage longer than the steps' window fails the batch's due
// emails after that window, as their own Prepare would: they are not
// prepared alone for another window.
func TestSendBatchPrepareBatchGivesUpAfterTheWindow(t *testing.T) {
	env := newBatchEnv(t)
	start := env.Now()
	env.OnActivity(contract.LoadBatchName, mock.Anything, mock.Anything).Return(contract.LoadBatchResult{
		Emails: []contract.BatchEmail{{EmailID: "a"}, {EmailID: "b"}}}, nil)
	env.OnActivity(contract.PrepareBatchName, mock.Anything, mock.Anything).Return(
		contract.PrepareBatchResult{}, errors.New("connection refused"))
	policy := fastPolicy
	policy.Steps = StepPolicy{Window: time.Hour, MaxInterval: time.Minute}
	env.ExecuteWorkflow(SendBatchName, SendBatchInput{BatchID: "batch1", Delivery: policy})
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), "connection refused")
	took := env.Now().Sub(start)
	require.GreaterOrEqual(t, took, 59*time.Minute)
	require.LessOrEqual(t, took, 61*time.Minute)
	env.AssertNotCalled(t, contract.PrepareName, mock.Anything, mock.Anything)
}

// A PrepareBatch that fails permanently, or answers for other emails,
// leaves every due email to its own Prepare.
func TestSendBatchFallsBackToPreparingAlone(t *testing.T) {
	for name, answer := range map[string]func() (contract.PrepareBatchResult, error){
		"permanent": func() (contract.PrepareBatchResult, error) {
			return contract.PrepareBatchResult{}, contract.Permanent(errors.New("bad batch"))
		},
		"other emails": func() (contract.PrepareBatchResult, error) {
			return contract.PrepareBatchResult{Emails: []contract.PreparedEmail{{EmailID: "a"}}}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			env := newBatchEnv(t)
			env.OnActivity(contract.LoadBatchName, mock.Anything, mock.Anything).Return(contract.LoadBatchResult{
				Emails: []contract.BatchEmail{{EmailID: "a"}, {EmailID: "b"}}}, nil)
			env.OnActivity(contract.PrepareBatchName, mock.Anything, mock.Anything).Return(
				func(context.Context, contract.PrepareBatchInput) (contract.PrepareBatchResult, error) {
					return answer()
				})
			var mu sync.Mutex
			var prepared []string
			env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in contract.PrepareInput) (contract.PrepareResult, error) {
					mu.Lock()
					defer mu.Unlock()
					prepared = append(prepared, in.EmailID)
					return contract.PrepareResult{Sandbox: []contract.SandboxRecipient{
						{Address: "delivered@posthaste.test", Events: []string{"delivered"}}}}, nil
				})
			events := recorded(env)
			env.ExecuteWorkflow(SendBatchName, SendBatchInput{BatchID: "batch1", Delivery: fastPolicy})
			require.NoError(t, env.GetWorkflowError())
			require.ElementsMatch(t, []string{"a", "b"}, prepared)
			require.Len(t, *events, 2)
		})
	}
}
