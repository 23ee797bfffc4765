package worker

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/webhook"
)

// names records what is registered on it; the methods it does not
// override are never called by Register.
type names struct {
	sdkworker.Registry
	workflows  []string
	activities map[string]string // registered name → the function's name
}

func (n *names) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	n.workflows = append(n.workflows, o.Name)
}

func (n *names) RegisterActivityWithOptions(fn any, o activity.RegisterOptions) {
	n.activities[o.Name] = runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
}

// TestRegisteredNames pins the names every workflow and activity is
// registered under, which the histories of running workflows record, and
// the package and method each activity name runs: moving an activity to
// another package must not rename it.
func TestRegisteredNames(t *testing.T) {
	acts := Activities{
		Sending:      &delivery.Sending{},
		Reconciler:   &delivery.Reconciler{},
		Retention:    &datareq.Retention{},
		Inbound:      &receiving.Activities{},
		Domains:      &domains.Activities{},
		Imports:      &imports.Activities{},
		Broadcasts:   &broadcast.Activities{},
		DataRequests: &datareq.Activities{},
		Webhooks:     &webhook.Activities{},
		Automations:  &automations.Activities{},
	}
	n := &names{activities: map[string]string{}}
	Register(n, acts)

	slices.Sort(n.workflows)
	require.Equal(t, []string{"AutomationRun", "Broadcast", "ContactImport", "DataRequest", "DeliverWebhook", "ProcessInbound",
		"Reconcile", "Retention", "SendBatch", "SendEmail", "VerifyDomain"}, n.workflows)

	const mod = "github.com/posthaste/posthaste/"
	want := map[string]string{
		"Prepare":               mod + "internal/submit/delivery.(*Sending)",
		"LoadBatch":             mod + "internal/submit/delivery.(*Sending)",
		"PrepareBatch":          mod + "internal/submit/delivery.(*Sending)",
		"RecordBatchEvents":     mod + "internal/submit/delivery.(*Sending)",
		"RecordEvents":          mod + "internal/submit/delivery.(*Sending)",
		"FailEmail":             mod + "internal/submit/delivery.(*Sending)",
		"DeliverLocal":          mod + "internal/submit/delivery.(*Sending)",
		"PurgeEmails":           mod + "internal/datareq.(*Retention)",
		"PurgeRequestLogs":      mod + "internal/datareq.(*Retention)",
		"PurgeAudit":            mod + "internal/datareq.(*Retention)",
		"PurgeExpired":          mod + "internal/datareq.(*Retention)",
		"ReconcileEmails":       mod + "internal/submit/delivery.(*Reconciler)",
		"ProcessInboundMessage": mod + "internal/receiving.(*Activities)",
		"CheckDomain":           mod + "internal/domains.(*Activities)",
		"SetDomainStatus":       mod + "internal/domains.(*Activities)",
		"StartContactImport":    mod + "internal/imports.(*Activities)",
		"ApplyImportChunk":      mod + "internal/imports.(*Activities)",
		"FinishContactImport":   mod + "internal/imports.(*Activities)",
		"StartBroadcast":        mod + "internal/broadcast.(*Activities)",
		"ReserveBroadcastPace":  mod + "internal/broadcast.(*Activities)",
		"HandOffBroadcastChunk": mod + "internal/broadcast.(*Activities)",
		"FinishBroadcast":       mod + "internal/broadcast.(*Activities)",
		"StartDataRequest":      mod + "internal/datareq.(*Activities)",
		"ExportDataRequest":     mod + "internal/datareq.(*Activities)",
		"EraseDataRequest":      mod + "internal/datareq.(*Activities)",
		"EraseSubjectHistory":   mod + "internal/datareq.(*Activities)",
		"FinishDataRequest":     mod + "internal/datareq.(*Activities)",
		"DeliverWebhooks":       mod + "internal/webhook.(*Activities)",
		"LoadAutomationRun":     mod + "internal/automations.(*Activities)",
		"RunAutomationStep":     mod + "internal/automations.(*Activities)",
		"FinishAutomationRun":   mod + "internal/automations.(*Activities)",
	}
	got := map[string]string{}
	for name, fn := range n.activities {
		// A method value is named <package>.(*<type>).<method>-fm.
		typ, method, ok := strings.Cut(strings.TrimSuffix(fn, "-fm"), ").")
		require.True(t, ok, fn)
		require.Equal(t, name, method, "the activity %s runs the method of its name", name)
		got[name] = typ + ")"
	}
	require.Equal(t, want, got)
}
