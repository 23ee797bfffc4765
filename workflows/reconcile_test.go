package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

func newReconcileEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(Reconcile, workflow.RegisterOptions{Name: ReconcileName})
	env.RegisterActivityWithOptions(reconcilerActs.ReconcileEmails, activity.RegisterOptions{Name: contract.ReconcileEmailsName})
	return env
}

var reconcileIn = ReconcileInput{QueuedAfter: 10 * time.Minute, DeliveryWindow: 73 * time.Hour, MaxRestarts: 3, Limit: 500}

func TestReconcileUsesCutoffsFromItsStart(t *testing.T) {
	env := newReconcileEnv(t)
	start := time.Date(2026, 3, 10, 12, 5, 0, 0, time.UTC)
	env.SetStartTime(start)
	want := contract.ReconcileResult{Examined: 4, Running: 1, Restarted: 2, Failed: 1}
	env.OnActivity(contract.ReconcileEmailsName, mock.Anything, contract.ReconcileInput{
		QueuedBefore: start.Add(-10 * time.Minute), SentBefore: start.Add(-73 * time.Hour), MaxRestarts: 3, Limit: 500,
	}).Return(want, nil).Once()
	env.ExecuteWorkflow(ReconcileName, reconcileIn)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res contract.ReconcileResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, want, res)
	env.AssertExpectations(t)
}

func TestReconcileRetriesThenSucceeds(t *testing.T) {
	env := newReconcileEnv(t)
	env.OnActivity(contract.ReconcileEmailsName, mock.Anything, mock.Anything).
		Return(contract.ReconcileResult{}, errors.New("database restarting")).Once()
	env.OnActivity(contract.ReconcileEmailsName, mock.Anything, mock.Anything).
		Return(contract.ReconcileResult{Examined: 1, Failed: 1}, nil).Once()
	env.ExecuteWorkflow(ReconcileName, reconcileIn)
	require.NoError(t, env.GetWorkflowError())
	var res contract.ReconcileResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, 1, res.Failed)
	env.AssertExpectations(t)
}

func TestReconcileStopsOnPermanentErrors(t *testing.T) {
	env := newReconcileEnv(t)
	env.OnActivity(contract.ReconcileEmailsName, mock.Anything, mock.Anything).
		Return(contract.ReconcileResult{}, temporal.NewNonRetryableApplicationError(
			"no Temporal client", contract.ErrTypePermanent, nil)).Once()
	env.ExecuteWorkflow(ReconcileName, reconcileIn)
	require.ErrorContains(t, env.GetWorkflowError(), "no Temporal client")
	env.AssertExpectations(t)
}
