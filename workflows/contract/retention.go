package contract

import (
	"time"
)

// Registered names of the activities of Retention.
const (
	PurgeEmailsName      = "PurgeEmails"
	PurgeRequestLogsName = "PurgeRequestLogs"
	PurgeExpiredName     = "PurgeExpired"
	PurgeAuditName       = "PurgeAudit"
)

// PurgeInput bounds one sweep: rows older than Before (or, for
// PurgeExpired, expired at Before) are deleted BatchSize at a time, with a
// Pause between batches so the sweep leaves room to the API.
type PurgeInput struct {
	Before    time.Time
	BatchSize int
	Pause     time.Duration
}

// PurgeResult counts what a sweep deleted.
type PurgeResult struct {
	Deleted int
}

// PurgeRequestLogsInput says which days of the request log to drop.
type PurgeRequestLogsInput struct {
	Before time.Time // days entirely before this are dropped
	Now    time.Time // partitions are created ahead from this day
}
