package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

var inboundID = uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000bb")

func newInboundEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(ProcessInbound, workflow.RegisterOptions{Name: ProcessInboundName})
	env.RegisterActivityWithOptions(inboundActs.ProcessInboundMessage, activity.RegisterOptions{Name: contract.ProcessInboundMessageName})
	return env
}

func TestProcessInboundProcessesOnce(t *testing.T) {
	env := newInboundEnv(t)
	want := contract.ProcessInboundResult{Kind: "dsn", EmailID: uuid.New(), Events: 1, Suppressed: 1}
	env.OnActivity(contract.ProcessInboundMessageName, mock.Anything,
		contract.ProcessInboundInput{InboundID: inboundID}).Return(want, nil).Once()
	env.ExecuteWorkflow(ProcessInboundName, ProcessInboundInput{InboundID: inboundID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var got contract.ProcessInboundResult
	require.NoError(t, env.GetWorkflowResult(&got))
	require.Equal(t, want, got)
	env.AssertExpectations(t)
}

// A step that fails while the database is down is retried until it
// succeeds, with the default policy (a day) as with a short one.
func TestProcessInboundRetriesThroughAnOutage(t *testing.T) {
	env := newInboundEnv(t)
	env.OnActivity(contract.ProcessInboundMessageName, mock.Anything, mock.Anything).
		Return(contract.ProcessInboundResult{}, errors.New("connection refused")).Times(6)
	env.OnActivity(contract.ProcessInboundMessageName, mock.Anything, mock.Anything).
		Return(contract.ProcessInboundResult{Kind: "feedback"}, nil).Once()
	env.ExecuteWorkflow(ProcessInboundName, ProcessInboundInput{InboundID: inboundID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

// Past the step window the workflow fails (the row stays unprocessed,
// for an operator to look at); a permanent error fails it at once.
func TestProcessInboundGivesUp(t *testing.T) {
	env := newInboundEnv(t)
	env.OnActivity(contract.ProcessInboundMessageName, mock.Anything, mock.Anything).
		Return(contract.ProcessInboundResult{}, errors.New("connection refused"))
	env.ExecuteWorkflow(ProcessInboundName, ProcessInboundInput{InboundID: inboundID,
		Steps: StepPolicy{Window: time.Minute, MaxInterval: 10 * time.Second}})
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), "connection refused")

	env = newInboundEnv(t)
	env.OnActivity(contract.ProcessInboundMessageName, mock.Anything, mock.Anything).
		Return(contract.ProcessInboundResult{}, temporal.NewNonRetryableApplicationError("bad",
			contract.ErrTypePermanent, nil)).Once()
	env.ExecuteWorkflow(ProcessInboundName, ProcessInboundInput{InboundID: inboundID})
	require.ErrorContains(t, env.GetWorkflowError(), "bad")
	env.AssertExpectations(t)
}

// The recorded ProcessInbound history does not replay against a
// workflow that skips its step: the replay test can fail.
func TestProcessInboundReplayDetectsChange(t *testing.T) {
	changed := func(ctx workflow.Context, in ProcessInboundInput) (contract.ProcessInboundResult, error) {
		return contract.ProcessInboundResult{}, workflow.Sleep(ctx, time.Second)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: ProcessInboundName})
	require.Error(t, r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/processinbound_dsn.json"))
}
