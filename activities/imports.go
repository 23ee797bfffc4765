package activities

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// Registered names of the contact import activities.
const (
	StartContactImportName  = "StartContactImport"
	ApplyImportChunkName    = "ApplyImportChunk"
	FinishContactImportName = "FinishContactImport"
)

// ContactImportInput names an import.
type ContactImportInput struct {
	ImportID uuid.UUID
}

// StartContactImportResult is what the workflow needs to know of an import.
type StartContactImportResult struct {
	Chunks int
	// Ended: the import already completed or failed; nothing is left to do.
	Ended bool
}

// StartContactImport marks the import in progress and returns how many
// chunks it has. A missing import is a permanent error.
func (a *Activities) StartContactImport(ctx context.Context, in ContactImportInput) (StartContactImportResult, error) {
	imp, err := a.store.StartContactImport(ctx, in.ImportID)
	if err != nil {
		return StartContactImportResult{}, a.classify(err)
	}
	return StartContactImportResult{Chunks: imp.Chunks, Ended: imp.CompletedAt != nil}, nil
}

// ImportChunkInput names one chunk of an import.
type ImportChunkInput struct {
	ImportID uuid.UUID
	Seq      int
}

// ImportChunkResult counts what applying a chunk did.
type ImportChunkResult struct {
	Rows, Created, Updated, Skipped, Failed int
}

// ApplyImportChunk applies one chunk (store.ApplyImportChunk). Applying
// a chunk again returns its first counts and changes nothing, so a retry
// after a crash is harmless. A missing chunk is a permanent error.
func (a *Activities) ApplyImportChunk(ctx context.Context, in ImportChunkInput) (ImportChunkResult, error) {
	cc, err := a.store.ApplyImportChunk(ctx, in.ImportID, in.Seq)
	if err != nil {
		return ImportChunkResult{}, a.classify(err)
	}
	return ImportChunkResult{Rows: cc.Rows, Created: cc.Created, Updated: cc.Updated, Skipped: cc.Skipped,
		Failed: cc.Failed}, nil
}

// FinishContactImportInput ends an import: completed without a Reason,
// failed with it.
type FinishContactImportInput struct {
	ImportID uuid.UUID
	Reason   string
}

// FinishContactImport ends the import (store.FinishContactImport); ending
// it again changes nothing. A missing import has nothing to end.
func (a *Activities) FinishContactImport(ctx context.Context, in FinishContactImportInput) error {
	_, err := a.store.FinishContactImport(ctx, in.ImportID, in.Reason)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
