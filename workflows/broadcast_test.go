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
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

var (
	broadcastID   = uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000bb")
	broadcastTeam = uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000cc")
)

func newBroadcastEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(Broadcast, workflow.RegisterOptions{Name: BroadcastName})
	env.RegisterActivityWithOptions(broadcastActs.StartBroadcast, activity.RegisterOptions{Name: contract.StartBroadcastName})
	env.RegisterActivityWithOptions(broadcastActs.ReserveBroadcastPace, activity.RegisterOptions{Name: contract.ReserveBroadcastPaceName})
	env.RegisterActivityWithOptions(broadcastActs.HandOffBroadcastChunk, activity.RegisterOptions{Name: contract.HandOffBroadcastChunkName})
	env.RegisterActivityWithOptions(broadcastActs.FinishBroadcast, activity.RegisterOptions{Name: contract.FinishBroadcastName})
	return env
}

// contact returns the id of the i-th contact of the tests' segment.
func contact(i int) *uuid.UUID {
	id := uuid.MustParse("0190f0a4-7a4c-7000-8000-000000000000")
	id[15] = byte(i)
	return &id
}

// paceNow grants every pace reservation at once, in workflow time.
func paceNow(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(contract.ReserveBroadcastPaceName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.PaceInput) (contract.PaceResult, error) {
			return contract.PaceResult{}, nil
		})
}

// chunks hands over n chunks of 100 contacts and then reports no contact
// left; it records the chunks asked for.
func chunks(env *testsuite.TestWorkflowEnvironment, n int, asked *[]contract.BroadcastChunkInput) {
	env.OnActivity(contract.HandOffBroadcastChunkName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.BroadcastChunkInput) (contract.BroadcastChunkResult, error) {
			*asked = append(*asked, in)
			if in.Seq >= n {
				return contract.BroadcastChunkResult{Done: true, Last: in.After}, nil
			}
			return contract.BroadcastChunkResult{Last: contact(in.Seq + 1), Emails: 100}, nil
		})
}

func TestBroadcastHandsOverEveryChunkThenFinishes(t *testing.T) {
	env := newBroadcastEnv(t)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, contract.BroadcastInput{BroadcastID: broadcastID}).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastSend}, nil).Once()
	var paces []contract.PaceInput
	env.OnActivity(contract.ReserveBroadcastPaceName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.PaceInput) (contract.PaceResult, error) {
			paces = append(paces, in)
			return contract.PaceResult{}, nil
		})
	var asked []contract.BroadcastChunkInput
	chunks(env, 3, &asked)
	env.OnActivity(contract.FinishBroadcastName, mock.Anything, contract.BroadcastInput{BroadcastID: broadcastID}).
		Return(nil).Once()
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, asked, 4)
	for i, in := range asked {
		require.Equal(t, i, in.Seq)
		require.Equal(t, DefaultBroadcastChunk, in.Size)
		if i == 0 {
			require.Nil(t, in.After)
		} else {
			require.Equal(t, contact(i), in.After, "chunk %d starts after the last contact of the one before", i)
		}
	}
	require.Len(t, paces, 4)
	require.Equal(t, contract.PaceInput{TeamID: broadcastTeam, N: DefaultBroadcastChunk}, paces[0])
	env.AssertExpectations(t)
}

// Chunks wait for the team's pace: a reservation granted later is slept
// on, in workflow time.
func TestBroadcastWaitsForItsPace(t *testing.T) {
	env := newBroadcastEnv(t)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastSend}, nil)
	var handedAt []time.Time
	env.OnActivity(contract.ReserveBroadcastPaceName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.PaceInput) (contract.PaceResult, error) {
			// Each chunk of 100 may go 10 s after the previous one.
			return contract.PaceResult{Wait: 10 * time.Second}, nil
		})
	env.OnActivity(contract.HandOffBroadcastChunkName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.BroadcastChunkInput) (contract.BroadcastChunkResult, error) {
			handedAt = append(handedAt, env.Now())
			if in.Seq == 2 {
				return contract.BroadcastChunkResult{Done: true}, nil
			}
			return contract.BroadcastChunkResult{Last: contact(in.Seq + 1), Emails: 100}, nil
		})
	env.OnActivity(contract.FinishBroadcastName, mock.Anything, mock.Anything).Return(nil).Once()
	start := env.Now()
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, handedAt, 3)
	for i, at := range handedAt {
		require.GreaterOrEqual(t, at.Sub(start), time.Duration(i+1)*10*time.Second, "chunk %d went before its pace", i)
	}
}

// A scheduled broadcast waits on a durable timer, then sends.
func TestBroadcastWaitsForItsScheduledTime(t *testing.T) {
	env := newBroadcastEnv(t)
	at := env.Now().Add(3 * time.Hour)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastWait, ScheduledAt: &at}, nil).Once()
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastSend}, nil).Once()
	paceNow(env)
	var asked []contract.BroadcastChunkInput
	var firstAt time.Time
	env.OnActivity(contract.HandOffBroadcastChunkName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.BroadcastChunkInput) (contract.BroadcastChunkResult, error) {
			if len(asked) == 0 {
				firstAt = env.Now()
			}
			asked = append(asked, in)
			return contract.BroadcastChunkResult{Done: true}, nil
		})
	env.OnActivity(contract.FinishBroadcastName, mock.Anything, mock.Anything).Return(nil).Once()
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, asked, 1)
	require.False(t, firstAt.Before(at), "the first chunk went at %v, before the scheduled %v", firstAt, at)
	env.AssertExpectations(t)
}

// Canceling a scheduled broadcast wakes its workflow, which ends without
// handing anything over.
func TestBroadcastCanceledWhileScheduledEnds(t *testing.T) {
	env := newBroadcastEnv(t)
	at := env.Now().Add(30 * 24 * time.Hour)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastWait, ScheduledAt: &at}, nil).Once()
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastEnd}, nil).Once()
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, time.Minute)
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Less(t, env.Now().Sub(start), time.Hour, "the workflow waited for its timer instead of the wake")
	env.AssertExpectations(t) // no chunk, no finish
}

// A paused broadcast (quota used up) looks again after PauseRecheck, and
// goes on with the same chunk; a cancel during the pause ends it.
func TestBroadcastPausedLooksAgainAndResumes(t *testing.T) {
	env := newBroadcastEnv(t)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastSend}, nil)
	paceNow(env)
	var asked []contract.BroadcastChunkInput
	env.OnActivity(contract.HandOffBroadcastChunkName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.BroadcastChunkInput) (contract.BroadcastChunkResult, error) {
			asked = append(asked, in)
			switch len(asked) {
			case 1:
				return contract.BroadcastChunkResult{Last: contact(1), Emails: 100}, nil
			case 2, 3:
				return contract.BroadcastChunkResult{Paused: true, Reason: "quota"}, nil
			case 4:
				return contract.BroadcastChunkResult{Last: contact(2), Emails: 100}, nil
			}
			return contract.BroadcastChunkResult{Done: true, Last: in.After}, nil
		})
	env.OnActivity(contract.FinishBroadcastName, mock.Anything, mock.Anything).Return(nil).Once()
	start := env.Now()
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID, PauseRecheck: 6 * time.Hour})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, asked, 5)
	require.Equal(t, []int{0, 1, 1, 1, 2}, []int{asked[0].Seq, asked[1].Seq, asked[2].Seq, asked[3].Seq, asked[4].Seq})
	require.Equal(t, contact(1), asked[3].After)
	require.GreaterOrEqual(t, env.Now().Sub(start), 12*time.Hour, "two pauses of 6 h each")
	env.AssertExpectations(t)
}

func TestBroadcastCanceledMidwayStops(t *testing.T) {
	env := newBroadcastEnv(t)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastSend}, nil)
	paceNow(env)
	var asked []contract.BroadcastChunkInput
	env.OnActivity(contract.HandOffBroadcastChunkName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.BroadcastChunkInput) (contract.BroadcastChunkResult, error) {
			asked = append(asked, in)
			if in.Seq == 2 {
				return contract.BroadcastChunkResult{Canceled: true}, nil
			}
			return contract.BroadcastChunkResult{Last: contact(in.Seq + 1), Emails: 100}, nil
		})
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, asked, 3)
	env.AssertExpectations(t) // FinishBroadcast never ran: it has no expectation
}

// A chunk that fails while the database is down is retried until it
// succeeds, with the same input.
func TestBroadcastChunkRetriesThroughAnOutage(t *testing.T) {
	env := newBroadcastEnv(t)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastSend}, nil)
	paceNow(env)
	first := contract.BroadcastChunkInput{BroadcastID: broadcastID, Seq: 0, Size: DefaultBroadcastChunk}
	env.OnActivity(contract.HandOffBroadcastChunkName, mock.Anything, first).
		Return(contract.BroadcastChunkResult{}, errors.New("connection refused")).Times(4)
	env.OnActivity(contract.HandOffBroadcastChunkName, mock.Anything, first).
		Return(contract.BroadcastChunkResult{Done: true}, nil).Once()
	env.OnActivity(contract.FinishBroadcastName, mock.Anything, mock.Anything).Return(nil).Once()
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID,
		Steps: StepPolicy{Window: time.Hour, MaxInterval: time.Second}})
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

// A large audience continues as new every ChunksPerRun chunks, carrying
// the next chunk's number and the cursor.
func TestBroadcastContinuesAsNew(t *testing.T) {
	env := newBroadcastEnv(t)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{TeamID: broadcastTeam, Next: contract.BroadcastSend}, nil)
	paceNow(env)
	var asked []contract.BroadcastChunkInput
	chunks(env, 100, &asked)
	in := BroadcastInput{BroadcastID: broadcastID, Seq: 5, After: contact(5), ChunksPerRun: 3}
	env.ExecuteWorkflow(BroadcastName, in)
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	require.Equal(t, BroadcastName, can.WorkflowType.Name)
	var next BroadcastInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	want := in
	want.Seq, want.After = 8, contact(8)
	require.Equal(t, want, next)
	require.Equal(t, []int{5, 6, 7}, []int{asked[0].Seq, asked[1].Seq, asked[2].Seq})
}

// Nothing to do: a broadcast that is gone, canceled or sent.
func TestBroadcastThatEndedDoesNothing(t *testing.T) {
	env := newBroadcastEnv(t)
	env.OnActivity(contract.StartBroadcastName, mock.Anything, mock.Anything).
		Return(contract.BroadcastState{Next: contract.BroadcastEnd}, nil).Once()
	env.ExecuteWorkflow(BroadcastName, BroadcastInput{BroadcastID: broadcastID})
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}
