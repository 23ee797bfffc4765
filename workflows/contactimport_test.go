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
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

var importID = uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000aa")

func newImportEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(ContactImport, workflow.RegisterOptions{Name: ContactImportName})
	env.RegisterActivityWithOptions(importActs.StartContactImport, activity.RegisterOptions{Name: contract.StartContactImportName})
	env.RegisterActivityWithOptions(importActs.ApplyImportChunk, activity.RegisterOptions{Name: contract.ApplyImportChunkName})
	env.RegisterActivityWithOptions(importActs.FinishContactImport, activity.RegisterOptions{Name: contract.FinishContactImportName})
	return env
}

func TestContactImportAppliesChunksInOrder(t *testing.T) {
	env := newImportEnv(t)
	env.OnActivity(contract.StartContactImportName, mock.Anything, contract.ContactImportInput{ImportID: importID}).
		Return(contract.StartContactImportResult{Chunks: 3}, nil).Once()
	var applied []int
	env.OnActivity(contract.ApplyImportChunkName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.ImportChunkInput) (contract.ImportChunkResult, error) {
			applied = append(applied, in.Seq)
			return contract.ImportChunkResult{Rows: 10, Created: 10}, nil
		}).Times(3)
	env.OnActivity(contract.FinishContactImportName, mock.Anything,
		contract.FinishContactImportInput{ImportID: importID}).Return(nil).Once()
	env.ExecuteWorkflow(ContactImportName, ContactImportInput{ImportID: importID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []int{0, 1, 2}, applied)
	env.AssertExpectations(t)
}

// A chunk that fails while the database is down is retried until it
// succeeds; the import still completes.
func TestContactImportRetriesThroughAnOutage(t *testing.T) {
	env := newImportEnv(t)
	env.OnActivity(contract.StartContactImportName, mock.Anything, mock.Anything).
		Return(contract.StartContactImportResult{Chunks: 1}, nil)
	env.OnActivity(contract.ApplyImportChunkName, mock.Anything, mock.Anything).
		Return(contract.ImportChunkResult{}, errors.New("connection refused")).Times(5)
	env.OnActivity(contract.ApplyImportChunkName, mock.Anything, mock.Anything).
		Return(contract.ImportChunkResult{Rows: 1, Created: 1}, nil).Once()
	env.OnActivity(contract.FinishContactImportName, mock.Anything,
		contract.FinishContactImportInput{ImportID: importID}).Return(nil).Once()
	env.ExecuteWorkflow(ContactImportName, ContactImportInput{ImportID: importID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

// A permanent error ends the import failed, with a reason, and fails the
// workflow.
func TestContactImportFailsOnAPermanentError(t *testing.T) {
	env := newImportEnv(t)
	env.OnActivity(contract.StartContactImportName, mock.Anything, mock.Anything).
		Return(contract.StartContactImportResult{Chunks: 2}, nil)
	env.OnActivity(contract.ApplyImportChunkName, mock.Anything, contract.ImportChunkInput{ImportID: importID, Seq: 0}).
		Return(contract.ImportChunkResult{}, temporal.NewNonRetryableApplicationError("chunk 0 not found",
			contract.ErrTypePermanent, nil)).Once()
	env.OnActivity(contract.FinishContactImportName, mock.Anything,
		contract.FinishContactImportInput{ImportID: importID, Reason: importFailedReason}).Return(nil).Once()
	env.ExecuteWorkflow(ContactImportName, ContactImportInput{ImportID: importID})
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), "chunk 0 not found")
	env.AssertExpectations(t)
}

// After ChunksPerRun chunks the workflow continues as new from the next
// chunk, so a million-row import keeps each history bounded.
func TestContactImportContinuesAsNew(t *testing.T) {
	env := newImportEnv(t)
	env.OnActivity(contract.StartContactImportName, mock.Anything, mock.Anything).
		Return(contract.StartContactImportResult{Chunks: 5}, nil).Once()
	env.OnActivity(contract.ApplyImportChunkName, mock.Anything, contract.ImportChunkInput{ImportID: importID, Seq: 2}).
		Return(contract.ImportChunkResult{Rows: 1}, nil).Once()
	env.OnActivity(contract.ApplyImportChunkName, mock.Anything, contract.ImportChunkInput{ImportID: importID, Seq: 3}).
		Return(contract.ImportChunkResult{Rows: 1}, nil).Once()
	steps := StepPolicy{Window: time.Hour, MaxInterval: time.Second}
	env.ExecuteWorkflow(ContactImportName, ContactImportInput{ImportID: importID, Steps: steps, NextChunk: 2, ChunksPerRun: 2})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	require.Equal(t, ContactImportName, can.WorkflowType.Name)
	var next ContactImportInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, ContactImportInput{ImportID: importID, Steps: steps, NextChunk: 4, ChunksPerRun: 2}, next)
	env.AssertExpectations(t)
}

// An import that already ended (a workflow started again after the
// import failed) applies nothing.
func TestContactImportOfAnEndedImportDoesNothing(t *testing.T) {
	env := newImportEnv(t)
	env.OnActivity(contract.StartContactImportName, mock.Anything, mock.Anything).
		Return(contract.StartContactImportResult{Chunks: 3, Ended: true}, nil).Once()
	env.ExecuteWorkflow(ContactImportName, ContactImportInput{ImportID: importID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

func TestContactImportWorkflowID(t *testing.T) {
	require.Equal(t, "contact-import/"+importID.String(), ContactImportWorkflowID(importID.String()))
}
