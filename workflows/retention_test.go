package workflows

import (
	"context"
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

func newRetentionEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(Retention, workflow.RegisterOptions{Name: RetentionName})
	env.RegisterActivityWithOptions(retentionActs.PurgeEmails, activity.RegisterOptions{Name: contract.PurgeEmailsName})
	env.RegisterActivityWithOptions(retentionActs.PurgeRequestLogs, activity.RegisterOptions{Name: contract.PurgeRequestLogsName})
	env.RegisterActivityWithOptions(retentionActs.PurgeExpired, activity.RegisterOptions{Name: contract.PurgeExpiredName})
	env.RegisterActivityWithOptions(retentionActs.PurgeAudit, activity.RegisterOptions{Name: contract.PurgeAuditName})
	return env
}

var retentionIn = RetentionInput{Period: 30 * 24 * time.Hour, AuditPeriod: 365 * 24 * time.Hour,
	BatchSize: 500, Pause: 50 * time.Millisecond}

func TestRetentionSweepsWithTheCutoff(t *testing.T) {
	env := newRetentionEnv(t)
	start := time.Date(2026, 3, 10, 3, 17, 0, 0, time.UTC)
	env.SetStartTime(start)
	cutoff := start.Add(-30 * 24 * time.Hour)
	env.OnActivity(contract.PurgeEmailsName, mock.Anything,
		contract.PurgeInput{Before: cutoff, BatchSize: 500, Pause: 50 * time.Millisecond}).
		Return(contract.PurgeResult{Deleted: 1200}, nil).Once()
	env.OnActivity(contract.PurgeRequestLogsName, mock.Anything,
		contract.PurgeRequestLogsInput{Before: cutoff, Now: start}).
		Return(contract.PurgeResult{Deleted: 1}, nil).Once()
	env.OnActivity(contract.PurgeExpiredName, mock.Anything,
		contract.PurgeInput{Before: start, BatchSize: 500, Pause: 50 * time.Millisecond}).
		Return(contract.PurgeResult{Deleted: 7}, nil).Once()
	env.OnActivity(contract.PurgeAuditName, mock.Anything,
		contract.PurgeInput{Before: start.Add(-365 * 24 * time.Hour), BatchSize: 500, Pause: 50 * time.Millisecond}).
		Return(contract.PurgeResult{Deleted: 4}, nil).Once()
	env.ExecuteWorkflow(RetentionName, retentionIn)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res RetentionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, RetentionResult{Emails: 1200, LogPartitions: 1, Expired: 7, Audit: 4}, res)
	env.AssertExpectations(t)
}

func TestRetentionRetriesAndRunsEverySweep(t *testing.T) {
	env := newRetentionEnv(t)
	// The email sweep fails once (the database restarted), then succeeds.
	env.OnActivity(contract.PurgeEmailsName, mock.Anything, mock.Anything).
		Return(contract.PurgeResult{}, errors.New("connection reset")).Once()
	env.OnActivity(contract.PurgeEmailsName, mock.Anything, mock.Anything).
		Return(contract.PurgeResult{Deleted: 3}, nil).Once()
	// The log sweep fails for good: the expiry sweep still runs.
	env.OnActivity(contract.PurgeRequestLogsName, mock.Anything, mock.Anything).
		Return(contract.PurgeResult{}, temporal.NewNonRetryableApplicationError("broken", "Permanent", nil))
	env.OnActivity(contract.PurgeExpiredName, mock.Anything, mock.Anything).
		Return(contract.PurgeResult{Deleted: 2}, nil).Once()
	env.OnActivity(contract.PurgeAuditName, mock.Anything, mock.Anything).
		Return(contract.PurgeResult{Deleted: 1}, nil).Once()
	env.ExecuteWorkflow(RetentionName, retentionIn)
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), "broken")
	env.AssertExpectations(t)
}

// The activities run for real in activities_test; this checks the
// workflow's activity options allow a long sweep that heartbeats.
func TestRetentionActivityOptions(t *testing.T) {
	env := newRetentionEnv(t)
	env.OnActivity(contract.PurgeEmailsName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ contract.PurgeInput) (contract.PurgeResult, error) {
			info := activity.GetInfo(ctx)
			if info.HeartbeatTimeout != 2*time.Minute {
				return contract.PurgeResult{}, temporal.NewNonRetryableApplicationError(
					"heartbeat timeout "+info.HeartbeatTimeout.String(), "Test", nil)
			}
			return contract.PurgeResult{}, nil
		})
	env.OnActivity(contract.PurgeRequestLogsName, mock.Anything, mock.Anything).Return(contract.PurgeResult{}, nil)
	env.OnActivity(contract.PurgeExpiredName, mock.Anything, mock.Anything).Return(contract.PurgeResult{}, nil)
	env.OnActivity(contract.PurgeAuditName, mock.Anything, mock.Anything).Return(contract.PurgeResult{}, nil)
	env.ExecuteWorkflow(RetentionName, retentionIn)
	require.NoError(t, env.GetWorkflowError())
}

// A schedule made before the audit log passes no AuditPeriod: its sweeps
// delete no audit entries.
func TestRetentionWithoutAuditPeriodKeepsTheAuditLog(t *testing.T) {
	env := newRetentionEnv(t)
	env.OnActivity(contract.PurgeEmailsName, mock.Anything, mock.Anything).Return(contract.PurgeResult{}, nil)
	env.OnActivity(contract.PurgeRequestLogsName, mock.Anything, mock.Anything).Return(contract.PurgeResult{}, nil)
	env.OnActivity(contract.PurgeExpiredName, mock.Anything, mock.Anything).Return(contract.PurgeResult{}, nil)
	in := retentionIn
	in.AuditPeriod = 0
	env.ExecuteWorkflow(RetentionName, in)
	require.NoError(t, env.GetWorkflowError())
	env.AssertNotCalled(t, contract.PurgeAuditName, mock.Anything, mock.Anything)
}
