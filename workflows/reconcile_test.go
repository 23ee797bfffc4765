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

	"github.com/posthaste/posthaste/activities"
)

func newReconcileEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(Reconcile, workflow.RegisterOptions{Name: ReconcileName})
	env.RegisterActivityWithOptions(a.ReconcileEmails, activity.RegisterOptions{Name: activities.ReconcileEmailsName})
	return env
}

var reconcileIn = ReconcileInput{QueuedAfter: 10 * time.Minute, DeliveryWindow: 73 * time.Hour, MaxRestarts: 3, Limit: 500}

func TestReconcileUsesCutoffsFromItsStart(t *testing.T) {
	env := newReconcileEnv(t)
	start := time.Date(2026, 3, 10, 12, 5, 0, 0, time.UTC)
	env.SetStartTime(start)
	want := activities.ReconcileResult{Examined: 4, Running: 1, Restarted: 2, Failed: 1}
	env.OnActivity(activities.ReconcileEmailsName, mock.Anything, activities.ReconcileInput{
		QueuedBefore: start.Add(-10 * time.Minute), SentBefore: start.Add(-73 * time.Hour), MaxRestarts: 3, Limit: 500,
	}).Return(want, nil).Once()
	env.ExecuteWorkflow(ReconcileName, reconcileIn)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res activities.ReconcileResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, want, res)
	env.AssertExpectations(t)
}

func TestReconcileRetriesThenSucceeds(t *testing.T) {
	env := newReconcileEnv(t)
	env.OnActivity(activities.ReconcileEmailsName, mock.Anything, mock.Anything).
		Return(activities.ReconcileResult{}, errors.New("database restarting")).Once()
	env.OnActivity(activities.ReconcileEmailsName, mock.Anything, mock.Anything).
		Return(activities.ReconcileResult{Examined: 1, Failed: 1}, nil).Once()
	env.ExecuteWorkflow(ReconcileName, reconcileIn)
	require.NoError(t, env.GetWorkflowError())
	var res activities.ReconcileResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, 1, res.Failed)
	env.AssertExpectations(t)
}

func TestReconcileStopsOnPermanentErrors(t *testing.T) {
	env := newReconcileEnv(t)
	env.OnActivity(activities.ReconcileEmailsName, mock.Anything, mock.Anything).
		Return(activities.ReconcileResult{}, temporal.NewNonRetryableApplicationError(
			"no Temporal client", activities.ErrTypePermanent, nil)).Once()
	env.ExecuteWorkflow(ReconcileName, reconcileIn)
	require.ErrorContains(t, env.GetWorkflowError(), "no Temporal client")
	env.AssertExpectations(t)
}
