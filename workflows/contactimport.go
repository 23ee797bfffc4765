package workflows

import (
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// ContactImportInput starts, or continues, the ContactImport workflow of
// one import.
type ContactImportInput struct {
	ImportID uuid.UUID
	// Steps is how long each step retries (a database outage).
	Steps StepPolicy
	// NextChunk is the first chunk this run applies: 0 for the first run,
	// where the previous run stopped after a continue-as-new.
	NextChunk int
	// ChunksPerRun bounds the chunks one run applies before it continues
	// as new, keeping each history small; 0 → DefaultChunksPerRun.
	ChunksPerRun int
}

// DefaultChunksPerRun is the chunks a ContactImport run applies before it
// continues as new: 100 chunks of 5,000 rows, half a million rows, in a
// history of a few hundred events.
const DefaultChunksPerRun = 100

// chunkAttempt bounds one try of applying a chunk.
const chunkAttempt = 2 * time.Minute

// importFailedReason is the reason an import that cannot go on shows.
const importFailedReason = "The import could not be completed."

// ContactImport applies the chunks of an uploaded CSV (POST
// /contacts/imports) one at a time, in order, with one local activity
// each, then marks the import completed. Applying a chunk is idempotent
// (the chunk is marked done in the transaction that writes its contacts),
// so a worker that crashes mid-chunk just has it applied again. Every
// step retries for Steps.Window; a step that fails for good (or outlasts
// it) ends the import failed. The progress lives in the import row, where
// GET reads it.
func ContactImport(ctx workflow.Context, in ContactImportInput) error {
	lctx := workflow.WithLocalActivityOptions(ctx, in.Steps.localOptions(chunkAttempt))
	logger := workflow.GetLogger(ctx)
	var st contract.StartContactImportResult
	if err := workflow.ExecuteLocalActivity(lctx, contract.StartContactImportName,
		contract.ContactImportInput{ImportID: in.ImportID}).Get(ctx, &st); err != nil {
		return failImport(lctx, in.ImportID, err)
	}
	if st.Ended {
		return nil
	}
	perRun := in.ChunksPerRun
	if perRun <= 0 {
		perRun = DefaultChunksPerRun
	}
	for seq := in.NextChunk; seq < st.Chunks; seq++ {
		if seq-in.NextChunk >= perRun {
			next := in
			next.NextChunk = seq
			return workflow.NewContinueAsNewError(ctx, ContactImportName, next)
		}
		var r contract.ImportChunkResult
		if err := workflow.ExecuteLocalActivity(lctx, contract.ApplyImportChunkName,
			contract.ImportChunkInput{ImportID: in.ImportID, Seq: seq}).Get(ctx, &r); err != nil {
			logger.Error("applying import chunk failed", "chunk", seq, "err", err)
			return failImport(lctx, in.ImportID, err)
		}
	}
	return workflow.ExecuteLocalActivity(lctx, contract.FinishContactImportName,
		contract.FinishContactImportInput{ImportID: in.ImportID}).Get(ctx, nil)
}

// failImport ends the import failed after the step error cause and
// returns cause, so the workflow fails too.
func failImport(ctx workflow.Context, id uuid.UUID, cause error) error {
	if err := workflow.ExecuteLocalActivity(ctx, contract.FinishContactImportName,
		contract.FinishContactImportInput{ImportID: id, Reason: importFailedReason}).Get(ctx, nil); err != nil {
		return err
	}
	return cause
}
