package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay replays histories recorded by the end-to-end tests
// (POSTHASTE_WRITE_HISTORIES=$PWD/workflows/testdata go test -run 'TestDev|TestDomains' ./cmd/posthaste/;
// retention.json and reconcile.json come from TestDevDispatchAndReconcile)
// against the current workflow code: a change that would break running
// workflows fails here. sendemail_smtp.json was recorded before local-first
// delivery (a regular Deliver activity); sendemail_smtp_local.json is the
// same send recorded after it (TestDev's sendemail_smtp.json, renamed):
// a GetVersion marker and a DeliverLocal marker; sendemail_smtp_first.json
// is the same send again once Prepare made the first attempt itself
// (DeliveryGroup.First): one marker, no DeliverLocal. TestDev decodes the
// payloads its dev encrypted before it writes them. automationrun_*.json come
// from TestDevAutomationJourney: every step type, a wait that received its
// event and one that timed out, and a run cancelled while it waits;
// automationrun_v1_*.json are the same runs recorded under the
// interpreter's version 1 (interpreterCalls), the others under version 2.
// sendbatch_rescheduled.json was recorded before SendBatch prepared its
// due emails together (a Prepare each); sendbatch_rescheduled_together.json
// is the same batch recorded after (TestDevIdempotencyBatchesAndSchedules,
// decoded with the dev's codec): a GetVersion marker, one PrepareBatch and
// one RecordBatchEvents for the email due at once, SendEmail's steps for
// the one moved earlier by a signal.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "recorded histories are missing")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(SendEmail, workflow.RegisterOptions{Name: SendEmailName})
			r.RegisterWorkflowWithOptions(VerifyDomain, workflow.RegisterOptions{Name: VerifyDomainName})
			r.RegisterWorkflowWithOptions(SendBatch, workflow.RegisterOptions{Name: SendBatchName})
			r.RegisterWorkflowWithOptions(DeliverWebhook, workflow.RegisterOptions{Name: DeliverWebhookName})
			r.RegisterWorkflowWithOptions(ContactImport, workflow.RegisterOptions{Name: ContactImportName})
			r.RegisterWorkflowWithOptions(ProcessInbound, workflow.RegisterOptions{Name: ProcessInboundName})
			r.RegisterWorkflowWithOptions(Broadcast, workflow.RegisterOptions{Name: BroadcastName})
			r.RegisterWorkflowWithOptions(DataRequest, workflow.RegisterOptions{Name: DataRequestName})
			r.RegisterWorkflowWithOptions(Retention, workflow.RegisterOptions{Name: RetentionName})
			r.RegisterWorkflowWithOptions(Reconcile, workflow.RegisterOptions{Name: ReconcileName})
			r.RegisterWorkflowWithOptions(AccountHealth, workflow.RegisterOptions{Name: AccountHealthName})
			r.RegisterWorkflowWithOptions(AutomationRun, workflow.RegisterOptions{Name: AutomationRunName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

// TestReplayDetectsChange makes sure the replay test can fail: a workflow
// that skips the first step does not replay the recorded history.
func TestReplayDetectsChange(t *testing.T) {
	changed := func(ctx workflow.Context, in SendEmailInput) error {
		return workflow.Sleep(ctx, 1)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: SendEmailName})
	require.Error(t, r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/sendemail_sandbox.json"))
}
