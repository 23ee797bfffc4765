package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay replays histories recorded by the end-to-end tests
// (POSTHASTE_WRITE_HISTORIES=$PWD/workflows/testdata go test ./cmd/posthaste/)
// against the current workflow code: a change that would break running
// workflows fails here.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "recorded histories are missing")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(SendEmail, workflow.RegisterOptions{Name: SendEmailName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}
