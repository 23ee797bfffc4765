package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/workflows/contract"
)

// EmailWorkflows is the part of Temporal the reconciler asks and acts on;
// worker.Starter implements it.
type EmailWorkflows interface {
	// Running reports whether the workflow that sends the email (its
	// own, its batch's, or its latest restart, see worker.EmailWorkflowID)
	// has a run that is still open.
	Running(ctx context.Context, ref store.EmailRef) (bool, error)
	// Restart starts a SendEmail workflow for the email under the ID of
	// restart number ref.Restarts. An ID that was already used is not an
	// error: that restart exists.
	Restart(ctx context.Context, ref store.EmailRef, scheduledAt *time.Time) error
}

// ReconcilerConfig wires the activity of Reconcile.
type ReconcilerConfig struct {
	// Workflows tells whether emails' workflows run and restarts them;
	// nil in a process that does not reconcile.
	Workflows EmailWorkflows
	// Metrics counts the emails reconciled; may be nil.
	Metrics *telemetry.Metrics
	// Logger may be nil.
	Logger *slog.Logger
}

// Reconciler is the activity of Reconcile: it ends or restarts the emails
// whose workflow no longer runs. The worker registers it under its name
// in workflows/contract.
type Reconciler struct {
	emails    *store.Emails
	workflows EmailWorkflows
	metrics   *telemetry.Metrics
	logger    *slog.Logger
}

// NewReconciler returns the activity of Reconcile over the emails area of
// the store.
func NewReconciler(cfg ReconcilerConfig, emails *store.Emails) *Reconciler {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{emails: emails, workflows: cfg.Workflows, metrics: cfg.Metrics,
		logger: logger.With("component", "activities")}
}

// Reasons the reconciler ends emails with, as the API, the dashboard and
// the email.failed webhook show them.
const (
	ReasonNoOutcome  = "No outcome within the delivery window."
	ReasonNotStarted = "Sending this email stopped before it was sent."
)

// Actions of the reconciler, as posthaste_reconciled_emails_total labels them.
const (
	ReconcileRestarted = "restarted"
	ReconcileFailed    = "failed"
)

// reconcilePage is how many emails one query lists.
const reconcilePage = 100

// ReconcileEmails finds the emails that have no outcome long after they
// should (store.StalledEmails) and whose workflow does not run, and either
// restarts them (never sent, fewer than MaxRestarts restarts) or ends
// their recipients without an outcome as `failed`. Emails whose workflow
// runs are left alone. It is idempotent: a retry restarts nothing twice
// (restart IDs are numbered and never reused) and fails nothing twice.
func (a *Reconciler) ReconcileEmails(ctx context.Context, in contract.ReconcileInput) (contract.ReconcileResult, error) {
	var res contract.ReconcileResult
	if a.workflows == nil {
		return res, temporal.NewNonRetryableApplicationError("this worker has no Temporal client to reconcile with",
			contract.ErrTypePermanent, nil)
	}
	if in.Limit <= 0 {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("limit %d must be positive", in.Limit),
			contract.ErrTypePermanent, nil)
	}
	var after *store.StalledEmail
	for res.Examined < in.Limit {
		limit := min(reconcilePage, in.Limit-res.Examined)
		list, err := a.emails.StalledEmails(ctx, store.StalledQuery{QueuedBefore: in.QueuedBefore,
			SentBefore: in.SentBefore, After: after, Limit: limit})
		if err != nil {
			return res, err
		}
		for _, e := range list {
			a.reconcile(ctx, e, in.MaxRestarts, &res)
		}
		res.Examined += len(list)
		activity.RecordHeartbeat(ctx, res.Examined)
		if len(list) < limit {
			break
		}
		after = &list[len(list)-1]
	}
	return res, nil
}

// reconcile restarts or ends one email whose workflow does not run.
func (a *Reconciler) reconcile(ctx context.Context, e store.StalledEmail, maxRestarts int, res *contract.ReconcileResult) {
	log := a.logger.With("email_id", e.ID, "team_id", e.TeamID, "restarts", e.Restarts)
	running, err := a.workflows.Running(ctx, e.EmailRef)
	if err != nil {
		log.Warn("reconciling: asking for the email's workflow", "err", err)
		res.Errors++
		return
	}
	if running {
		res.Running++
		return
	}
	reason := ReasonNoOutcome
	if !e.Sent {
		if e.Restarts < maxRestarts {
			next := e.EmailRef
			next.Restarts++
			if err := a.restart(ctx, next, e.ScheduledAt); err != nil {
				log.Warn("reconciling: restarting the email's workflow", "err", err)
				res.Errors++
				return
			}
			log.Warn("reconciling: restarted the workflow of an email left queued", "attempt", next.Restarts)
			res.Restarted++
			a.countReconciled(ReconcileRestarted)
			return
		}
		reason = ReasonNotStarted
	}
	n, err := a.emails.FailEmail(ctx, e.ID, reason)
	if err != nil {
		log.Warn("reconciling: failing the email", "err", err)
		res.Errors++
		return
	}
	if n > 0 {
		log.Warn("reconciling: failed an email without an outcome", "reason", reason, "recipients", n)
		res.Failed++
		a.countReconciled(ReconcileFailed)
	}
}

// restart starts the workflow of restart number ref.Restarts, then
// records it: a crash between the two starts the same ID again, which is
// harmless.
func (a *Reconciler) restart(ctx context.Context, ref store.EmailRef, at *time.Time) error {
	if err := a.workflows.Restart(ctx, ref, at); err != nil {
		return err
	}
	return a.emails.RecordRestart(ctx, ref.ID, ref.Restarts)
}

func (a *Reconciler) countReconciled(action string) {
	if a.metrics != nil {
		a.metrics.Reconciled.WithLabelValues(action).Inc()
	}
}
