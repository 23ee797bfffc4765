package workflows

import (
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// BroadcastInput starts, or continues, the Broadcast workflow of one
// broadcast.
type BroadcastInput struct {
	BroadcastID uuid.UUID
	// Steps is how long each step retries (a database outage).
	Steps StepPolicy
	// Seq and After are where this run starts: the next chunk's number
	// and the last contact handed over (nil: none yet). A continue-as-new
	// carries them over.
	Seq   int
	After *uuid.UUID
	// ChunkSize is the contacts per chunk, one SendBatch each;
	// 0 → DefaultBroadcastChunk.
	ChunkSize int
	// ChunksPerRun bounds the chunks one run hands over before it
	// continues as new; 0 → DefaultBroadcastChunksPerRun.
	ChunksPerRun int
	// PauseRecheck is how often a paused broadcast looks whether it may go
	// on; 0 → DefaultBroadcastPauseRecheck.
	PauseRecheck time.Duration
}

// Defaults of BroadcastInput.
const (
	// DefaultBroadcastChunk: a chunk is accepted like a batch of POST
	// /emails/batch, whose limit is 100 emails.
	DefaultBroadcastChunk = 100
	// DefaultBroadcastChunksPerRun keeps a run's history at a few
	// thousand events at most (about 4 a chunk, 7 when the pace makes it
	// wait): 250 chunks, 25,000 contacts.
	DefaultBroadcastChunksPerRun = 250
	// DefaultBroadcastPauseRecheck: a paused broadcast looks again hourly
	// (and at once when woken).
	DefaultBroadcastPauseRecheck = time.Hour
)

// broadcastChunkAttempt bounds one try of handing a chunk over.
const broadcastChunkAttempt = 2 * time.Minute

// Broadcast sends a broadcast: it waits for its scheduled time on a
// durable timer, then hands the segment's contacts to the send path a
// chunk at a time (HandOffBroadcastChunk: about a hundred emails accepted
// as one batch, one SendBatch workflow start), at the team's pace
// (ReserveBroadcastPace), and marks the broadcast sent when no contact is
// left. Every contact gets the broadcast at most once: a chunk is
// idempotent by its number, and the emails of a broadcast are unique per
// contact in the database, so a crash or a retry at any point hands no
// one over twice. A canceled broadcast ends at its next step (a WakeSignal
// makes that now); a paused one (quota used up, sender domain no longer
// verified) looks again every PauseRecheck. Large audiences continue as
// new every ChunksPerRun chunks.
func Broadcast(ctx workflow.Context, in BroadcastInput) error {
	lctx := workflow.WithLocalActivityOptions(ctx, in.Steps.localOptions(broadcastChunkAttempt))
	wake := workflow.GetSignalChannel(ctx, WakeSignal)
	ref := contract.BroadcastInput{BroadcastID: in.BroadcastID}
	var st contract.BroadcastState
	for {
		if err := workflow.ExecuteLocalActivity(lctx, contract.StartBroadcastName, ref).Get(ctx, &st); err != nil {
			return err
		}
		if st.Next != contract.BroadcastWait {
			break
		}
		if st.ScheduledAt != nil {
			if err := sleepOrWake(ctx, wake, st.ScheduledAt); err != nil {
				return err
			}
		}
	}
	if st.Next != contract.BroadcastSend {
		return nil // gone, canceled, sent, or never sent
	}
	size, perRun, recheck := in.ChunkSize, in.ChunksPerRun, in.PauseRecheck
	if size <= 0 {
		size = DefaultBroadcastChunk
	}
	if perRun <= 0 {
		perRun = DefaultBroadcastChunksPerRun
	}
	if recheck <= 0 {
		recheck = DefaultBroadcastPauseRecheck
	}
	seq, after := in.Seq, in.After
	for n := 0; ; n++ {
		if n >= perRun {
			next := in
			next.Seq, next.After = seq, after
			return workflow.NewContinueAsNewError(ctx, BroadcastName, next)
		}
		var pace contract.PaceResult
		if err := workflow.ExecuteLocalActivity(lctx, contract.ReserveBroadcastPaceName,
			contract.PaceInput{TeamID: st.TeamID, N: size}).Get(ctx, &pace); err != nil {
			return err
		}
		if pace.Wait > 0 {
			until := workflow.Now(ctx).Add(pace.Wait)
			if err := sleepOrWake(ctx, wake, &until); err != nil {
				return err
			}
		}
		var r contract.BroadcastChunkResult
		if err := workflow.ExecuteLocalActivity(lctx, contract.HandOffBroadcastChunkName, contract.BroadcastChunkInput{
			BroadcastID: in.BroadcastID, Seq: seq, After: after, Size: size}).Get(ctx, &r); err != nil {
			return err
		}
		switch {
		case r.Canceled:
			return nil
		case r.Paused:
			workflow.GetLogger(ctx).Info("broadcast paused", "broadcast_id", in.BroadcastID, "reason", r.Reason)
			until := workflow.Now(ctx).Add(recheck)
			if err := sleepOrWake(ctx, wake, &until); err != nil {
				return err
			}
			continue
		case r.Done:
			return workflow.ExecuteLocalActivity(lctx, contract.FinishBroadcastName, ref).Get(ctx, nil)
		}
		seq, after = seq+1, r.Last
	}
}
