package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/internal/health/notices"
	"github.com/posthaste/posthaste/workflows/contract"
)

// healthActs is the account health activity, registered by the tests on a
// nil receiver.
var healthActs *notices.Activities

func newHealthEnv() *testsuite.TestWorkflowEnvironment {
	env := testEnv()
	env.RegisterWorkflowWithOptions(AccountHealth, workflow.RegisterOptions{Name: AccountHealthName})
	env.RegisterActivityWithOptions(healthActs.CheckAccountHealth,
		activity.RegisterOptions{Name: contract.CheckAccountHealthName})
	return env
}

var healthIn = AccountHealthInput{Window: 30 * 24 * time.Hour, Pause: true}

// TestAccountHealthPassesItsInput: one run is one evaluation with the
// Schedule's window and pause.
func TestAccountHealthPassesItsInput(t *testing.T) {
	env := newHealthEnv()
	want := contract.CheckAccountHealthResult{Crossed: 1, Sent: 1}
	env.OnActivity(contract.CheckAccountHealthName, mock.Anything,
		contract.CheckAccountHealthInput{Window: healthIn.Window, Pause: true}).Return(want, nil).Once()
	env.ExecuteWorkflow(AccountHealthName, healthIn)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res contract.CheckAccountHealthResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, want, res)
	env.AssertExpectations(t)
}

// TestAccountHealthRetriesThenGivesUp: a failing evaluation is retried a
// few times, then the run fails and the next one tries again.
func TestAccountHealthRetriesThenGivesUp(t *testing.T) {
	env := newHealthEnv()
	env.OnActivity(contract.CheckAccountHealthName, mock.Anything, mock.Anything).
		Return(contract.CheckAccountHealthResult{}, errors.New("database restarting")).Times(3)
	env.ExecuteWorkflow(AccountHealthName, healthIn)
	require.True(t, env.IsWorkflowCompleted())
	require.Error(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}
