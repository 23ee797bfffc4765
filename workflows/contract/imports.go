package contract

import (
	"github.com/google/uuid"
)

// Registered names of the activities of ContactImport.
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

// ImportChunkInput names one chunk of an import.
type ImportChunkInput struct {
	ImportID uuid.UUID
	Seq      int
}

// ImportChunkResult counts what applying a chunk did.
type ImportChunkResult struct {
	Rows, Created, Updated, Skipped, Failed int
}

// FinishContactImportInput ends an import: completed without a Reason,
// failed with it.
type FinishContactImportInput struct {
	ImportID uuid.UUID
	Reason   string
}
