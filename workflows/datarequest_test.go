package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

var dataRequestID = uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000dd")

func newDataRequestEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(DataRequest, workflow.RegisterOptions{Name: DataRequestName})
	for name, fn := range map[string]any{
		contract.StartDataRequestName:    dataRequestActs.StartDataRequest,
		contract.ExportDataRequestName:   dataRequestActs.ExportDataRequest,
		contract.EraseDataRequestName:    dataRequestActs.EraseDataRequest,
		contract.EraseSubjectHistoryName: dataRequestActs.EraseSubjectHistory,
		contract.FinishDataRequestName:   dataRequestActs.FinishDataRequest,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	return env
}

var dataReq = contract.DataRequestInput{RequestID: dataRequestID}

// An export is one step that completes the request itself.
func TestDataRequestExport(t *testing.T) {
	env := newDataRequestEnv(t)
	env.OnActivity(contract.StartDataRequestName, mock.Anything, dataReq).
		Return(contract.StartDataRequestResult{Type: contract.DataRequestExport}, nil).Once()
	env.OnActivity(contract.ExportDataRequestName, mock.Anything, dataReq).Return(nil).Once()
	env.ExecuteWorkflow(DataRequestName, DataRequestInput{RequestID: dataRequestID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

// An erasure erases PostgreSQL (retrying through an outage), then the
// histories' key, and completes only once the codec's key cache has
// expired everywhere: the durable timer runs between the two, followed
// by a second pass over PostgreSQL.
func TestDataRequestErasureWaitsOutTheKeyCache(t *testing.T) {
	env := newDataRequestEnv(t)
	env.OnActivity(contract.StartDataRequestName, mock.Anything, dataReq).
		Return(contract.StartDataRequestResult{Type: "erasure"}, nil).Once()
	env.OnActivity(contract.EraseDataRequestName, mock.Anything, dataReq).
		Return(errors.New("connection refused")).Twice()
	var secondPassAt time.Time
	env.OnActivity(contract.EraseDataRequestName, mock.Anything, dataReq).Return(nil).Once()
	env.OnActivity(contract.EraseDataRequestName, mock.Anything, dataReq).Return(
		func(context.Context, contract.DataRequestInput) error { secondPassAt = env.Now(); return nil }).Once()
	var erasedAt, finishedAt time.Time
	env.OnActivity(contract.EraseSubjectHistoryName, mock.Anything, dataReq).Return(
		func(context.Context, contract.DataRequestInput) error { erasedAt = env.Now(); return nil }).Once()
	env.OnActivity(contract.FinishDataRequestName, mock.Anything,
		contract.FinishDataRequestInput{RequestID: dataRequestID}).Return(
		func(context.Context, contract.FinishDataRequestInput) error { finishedAt = env.Now(); return nil }).Once()
	env.ExecuteWorkflow(DataRequestName, DataRequestInput{RequestID: dataRequestID, EraseWait: 30 * time.Second})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.GreaterOrEqual(t, finishedAt.Sub(erasedAt), 30*time.Second)
	require.GreaterOrEqual(t, secondPassAt.Sub(erasedAt), 30*time.Second, "the second pass comes after the wait")
	env.AssertExpectations(t)
}

// A step that fails for good ends the request failed with a reason.
func TestDataRequestFailsOnAPermanentError(t *testing.T) {
	env := newDataRequestEnv(t)
	env.OnActivity(contract.StartDataRequestName, mock.Anything, dataReq).
		Return(contract.StartDataRequestResult{Type: "erasure"}, nil).Once()
	env.OnActivity(contract.EraseDataRequestName, mock.Anything, dataReq).
		Return(temporal.NewNonRetryableApplicationError("no address", contract.ErrTypePermanent, nil)).Once()
	env.OnActivity(contract.FinishDataRequestName, mock.Anything,
		contract.FinishDataRequestInput{RequestID: dataRequestID, Reason: dataRequestFailedReason}).Return(nil).Once()
	env.ExecuteWorkflow(DataRequestName, DataRequestInput{RequestID: dataRequestID})
	require.True(t, env.IsWorkflowCompleted())
	require.Error(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

// A request that already ended (a duplicate start) does nothing.
func TestDataRequestEndedDoesNothing(t *testing.T) {
	env := newDataRequestEnv(t)
	env.OnActivity(contract.StartDataRequestName, mock.Anything, dataReq).
		Return(contract.StartDataRequestResult{Type: "erasure", Ended: true}, nil).Once()
	env.ExecuteWorkflow(DataRequestName, DataRequestInput{RequestID: dataRequestID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}
