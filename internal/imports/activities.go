package imports

import (
	"context"
	"errors"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Activities are the activities of the ContactImport workflow, which
// applies an import's chunks. The worker registers each under its name in
// workflows/contract.
type Activities struct {
	audience *store.Audience
}

// NewActivities returns the activities of ContactImport over st.
func NewActivities(st *store.Audience) *Activities { return &Activities{audience: st} }

// StartContactImport marks the import in progress and returns how many
// chunks it has. A missing import is a permanent error.
func (a *Activities) StartContactImport(ctx context.Context, in contract.ContactImportInput) (contract.StartContactImportResult, error) {
	imp, err := a.audience.StartContactImport(ctx, in.ImportID)
	if err != nil {
		return contract.StartContactImportResult{}, classify(err)
	}
	return contract.StartContactImportResult{Chunks: imp.Chunks, Ended: imp.CompletedAt != nil}, nil
}

// ApplyImportChunk applies one chunk (store.ApplyImportChunk). Applying
// a chunk again returns its first counts and changes nothing, so a retry
// after a crash is harmless. A missing chunk is a permanent error.
func (a *Activities) ApplyImportChunk(ctx context.Context, in contract.ImportChunkInput) (contract.ImportChunkResult, error) {
	cc, err := a.audience.ApplyImportChunk(ctx, in.ImportID, in.Seq)
	if err != nil {
		return contract.ImportChunkResult{}, classify(err)
	}
	return contract.ImportChunkResult{Rows: cc.Rows, Created: cc.Created, Updated: cc.Updated, Skipped: cc.Skipped,
		Failed: cc.Failed}, nil
}

// FinishContactImport ends the import (store.FinishContactImport); ending
// it again changes nothing. A missing import has nothing to end.
func (a *Activities) FinishContactImport(ctx context.Context, in contract.FinishContactImportInput) error {
	_, err := a.audience.FinishContactImport(ctx, in.ImportID, in.Reason)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// classify makes a missing import or chunk a permanent error; anything
// else stays retryable.
func classify(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return contract.Permanent(err)
	}
	return err
}
