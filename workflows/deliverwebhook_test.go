package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

func newWebhookEnv() *testsuite.TestWorkflowEnvironment {
	env := testEnv()
	env.RegisterWorkflowWithOptions(DeliverWebhook, workflow.RegisterOptions{Name: DeliverWebhookName})
	env.RegisterActivityWithOptions(webhookActs.DeliverWebhooks, activity.RegisterOptions{Name: contract.DeliverWebhooksName})
	return env
}

// The workflow sleeps until the next retry is due, runs the pass again
// then, and ends when the endpoint is disabled.
func TestDeliverWebhookSleepsUntilTheNextRetry(t *testing.T) {
	env := newWebhookEnv()
	start := env.Now()
	var passes []time.Duration
	env.OnActivity(contract.DeliverWebhooksName, mock.Anything, contract.DeliverWebhooksInput{WebhookID: "w1"}).Return(
		func(_ context.Context, _ contract.DeliverWebhooksInput) (contract.DeliverWebhooksResult, error) {
			passes = append(passes, env.Now().Sub(start))
			switch len(passes) {
			case 1:
				next := env.Now().Add(5 * time.Minute)
				return contract.DeliverWebhooksResult{NextAt: &next}, nil
			case 2:
				return contract.DeliverWebhooksResult{More: true}, nil
			}
			return contract.DeliverWebhooksResult{Stop: true}, nil
		})
	env.ExecuteWorkflow(DeliverWebhookName, DeliverWebhookInput{WebhookID: "w1"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, passes, 3)
	require.GreaterOrEqual(t, passes[1], 5*time.Minute, "the second pass waits for the retry")
	require.Equal(t, passes[1], passes[2], "More runs the next pass at once")
}

// A wake signal ends the wait at once, long before the timer.
func TestDeliverWebhookWakesOnSignal(t *testing.T) {
	env := newWebhookEnv()
	start := env.Now()
	var passes []time.Duration
	env.OnActivity(contract.DeliverWebhooksName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ contract.DeliverWebhooksInput) (contract.DeliverWebhooksResult, error) {
			passes = append(passes, env.Now().Sub(start))
			if len(passes) == 1 {
				next := env.Now().Add(10 * time.Hour)
				return contract.DeliverWebhooksResult{NextAt: &next}, nil
			}
			return contract.DeliverWebhooksResult{Stop: true}, nil
		})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WebhookWakeSignal, nil) }, time.Minute)
	env.ExecuteWorkflow(DeliverWebhookName, DeliverWebhookInput{WebhookID: "w1"})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, passes, 2)
	require.Less(t, passes[1], 2*time.Minute)
}

// An idle endpoint waits for a signal without a timer; a failing pass is
// retried by Temporal until it works.
func TestDeliverWebhookRetriesAFailingPassAndIdles(t *testing.T) {
	env := newWebhookEnv()
	calls := 0
	env.OnActivity(contract.DeliverWebhooksName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ contract.DeliverWebhooksInput) (contract.DeliverWebhooksResult, error) {
			calls++
			switch calls {
			case 1:
				return contract.DeliverWebhooksResult{}, errors.New("database unavailable")
			case 2:
				return contract.DeliverWebhooksResult{}, nil // nothing waits: idle
			}
			return contract.DeliverWebhooksResult{Stop: true}, nil
		})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WebhookWakeSignal, nil) }, 48*time.Hour)
	env.ExecuteWorkflow(DeliverWebhookName, DeliverWebhookInput{WebhookID: "w1"})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 3, calls)
}

// After passesPerRun passes the workflow continues as new with its input.
func TestDeliverWebhookContinuesAsNew(t *testing.T) {
	env := newWebhookEnv()
	env.OnActivity(contract.DeliverWebhooksName, mock.Anything, mock.Anything).Return(
		contract.DeliverWebhooksResult{More: true}, nil)
	env.ExecuteWorkflow(DeliverWebhookName, DeliverWebhookInput{WebhookID: "w1"})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	require.Equal(t, DeliverWebhookName, can.WorkflowType.Name)
}
