package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// RetentionInput configures one retention sweep.
type RetentionInput struct {
	// Period: emails and request logs are deleted this long after they
	// stopped changing (POSTHASTE_RETENTION, 30 days by default).
	Period time.Duration
	// AuditPeriod: audit log entries are deleted this long after they
	// were written (POSTHASTE_AUDIT_RETENTION, a year by default); 0 (the
	// input of schedules made before the audit log) deletes none.
	AuditPeriod time.Duration
	// BatchSize bounds each delete; Pause separates batches.
	BatchSize int
	Pause     time.Duration
}

// RetentionResult counts what a sweep deleted.
type RetentionResult struct {
	Emails        int // emails, with their recipients, events, attachments and messages
	LogPartitions int // daily partitions of the request log
	Expired       int // idempotency records
	Audit         int // audit log entries
}

// Retention deletes data that stopped changing more than in.Period ago
// (API.md, Logs): emails that are neither scheduled nor in flight, whole
// days of the request log, and expired idempotency records; and audit log
// entries older than in.AuditPeriod, which outlive the others. Every sweep
// runs even when another fails; the first failure fails the workflow
// after all ran. The Schedule `retention` starts it daily.
func Retention(ctx workflow.Context, in RetentionInput) (RetentionResult, error) {
	now := workflow.Now(ctx)
	before := now.Add(-in.Period)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:    2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 10 * time.Second, MaximumAttempts: 5},
	})
	var res RetentionResult
	var errs []error
	var r contract.PurgeResult
	err := workflow.ExecuteActivity(ctx, contract.PurgeEmailsName,
		contract.PurgeInput{Before: before, BatchSize: in.BatchSize, Pause: in.Pause}).Get(ctx, &r)
	res.Emails, errs = r.Deleted, append(errs, err)
	r = contract.PurgeResult{}
	err = workflow.ExecuteActivity(ctx, contract.PurgeRequestLogsName,
		contract.PurgeRequestLogsInput{Before: before, Now: now}).Get(ctx, &r)
	res.LogPartitions, errs = r.Deleted, append(errs, err)
	r = contract.PurgeResult{}
	err = workflow.ExecuteActivity(ctx, contract.PurgeExpiredName,
		contract.PurgeInput{Before: now, BatchSize: in.BatchSize, Pause: in.Pause}).Get(ctx, &r)
	res.Expired, errs = r.Deleted, append(errs, err)
	// Histories of sweeps started before the audit log have no audit
	// sweep; the version marker keeps them replaying.
	if in.AuditPeriod > 0 && workflow.GetVersion(ctx, "audit-retention", workflow.DefaultVersion, 1) == 1 {
		r = contract.PurgeResult{}
		err = workflow.ExecuteActivity(ctx, contract.PurgeAuditName, contract.PurgeInput{Before: now.Add(-in.AuditPeriod),
			BatchSize: in.BatchSize, Pause: in.Pause}).Get(ctx, &r)
		res.Audit, errs = r.Deleted, append(errs, err)
	}
	workflow.GetLogger(ctx).Info("retention sweep done", "emails", res.Emails,
		"log_partitions", res.LogPartitions, "expired", res.Expired, "audit", res.Audit)
	for _, e := range errs {
		if e != nil {
			return res, errors.Join(errs...)
		}
	}
	return res, nil
}
