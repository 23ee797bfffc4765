package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// ReconcileInput configures a reconciliation; the Schedule `reconcile`
// starts Reconcile with it every few minutes.
type ReconcileInput struct {
	// QueuedAfter: an email still queued this long after it was due, with
	// no outbox entry and no running workflow, is restarted
	// (POSTHASTE_RECONCILE_QUEUED_AFTER).
	QueuedAfter time.Duration
	// DeliveryWindow: an email sent this long after it was due that still
	// has recipients without an outcome and no running workflow is ended
	// `failed` (POSTHASTE_DELIVERY_EXPIRE plus POSTHASTE_RECONCILE_MARGIN).
	DeliveryWindow time.Duration
	// MaxRestarts bounds the restarts of one email.
	MaxRestarts int
	// Limit bounds the emails examined in one run.
	Limit int
}

// Reconcile finds the emails that have no outcome long after they should
// and whose workflow does not run (a bug, a lost start, a workflow
// terminated by an operator), and restarts those never sent or ends them
// `failed` (delivery.ReconcileEmails). Its cutoffs are taken from the
// workflow's clock when it starts.
func Reconcile(ctx workflow.Context, in ReconcileInput) (contract.ReconcileResult, error) {
	now := workflow.Now(ctx)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        10 * time.Second,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{contract.ErrTypePermanent},
		},
	})
	var res contract.ReconcileResult
	err := workflow.ExecuteActivity(ctx, contract.ReconcileEmailsName, contract.ReconcileInput{
		QueuedBefore: now.Add(-in.QueuedAfter),
		SentBefore:   now.Add(-in.DeliveryWindow),
		MaxRestarts:  in.MaxRestarts,
		Limit:        in.Limit,
	}).Get(ctx, &res)
	if err != nil {
		return res, err
	}
	workflow.GetLogger(ctx).Info("reconciliation done", "examined", res.Examined, "running", res.Running,
		"restarted", res.Restarted, "failed", res.Failed, "errors", res.Errors)
	return res, nil
}
