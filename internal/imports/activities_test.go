package imports_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// TestActivities runs an import through the ContactImport workflow's
// activities: a retried chunk returns its first counts, ending twice
// changes nothing, and a missing import is a permanent error to start
// and nothing to end.
func TestActivities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 2)
	acts := imports.NewActivities(f.st.Audience)
	imp, err := f.svc.Create(ctx, f.teamA, strings.NewReader("email\na@example.com\nb@example.com\nc@example.com\n"),
		imports.Options{})
	require.NoError(t, err)

	start, err := acttest.Run[contract.ContactImportInput, contract.StartContactImportResult](t,
		acts.StartContactImport, contract.ContactImportInput{ImportID: imp.ID})
	require.NoError(t, err)
	require.Equal(t, contract.StartContactImportResult{Chunks: 2}, start)
	var created int
	for seq := range start.Chunks {
		in := contract.ImportChunkInput{ImportID: imp.ID, Seq: seq}
		first, err := acttest.Run[contract.ImportChunkInput, contract.ImportChunkResult](t, acts.ApplyImportChunk, in)
		require.NoError(t, err)
		again, err := acttest.Run[contract.ImportChunkInput, contract.ImportChunkResult](t, acts.ApplyImportChunk, in)
		require.NoError(t, err)
		require.Equal(t, first, again, "a retried chunk returns its first counts")
		created += first.Created
	}
	require.Equal(t, 3, created)
	for range 2 {
		_, err = acttest.Run[contract.FinishContactImportInput, struct{}](t, acts.FinishContactImport,
			contract.FinishContactImportInput{ImportID: imp.ID})
		require.NoError(t, err)
	}
	start, err = acttest.Run[contract.ContactImportInput, contract.StartContactImportResult](t,
		acts.StartContactImport, contract.ContactImportInput{ImportID: imp.ID})
	require.NoError(t, err)
	require.True(t, start.Ended)

	missing := uuid.Must(uuid.NewV7())
	_, err = acttest.Run[contract.ContactImportInput, contract.StartContactImportResult](t,
		acts.StartContactImport, contract.ContactImportInput{ImportID: missing})
	_, permanent := contract.PermanentReason(err)
	require.True(t, permanent, "a missing import cannot start: %v", err)
	_, err = acttest.Run[contract.FinishContactImportInput, struct{}](t, acts.FinishContactImport,
		contract.FinishContactImportInput{ImportID: missing})
	require.NoError(t, err, "a missing import has nothing to end")
}
