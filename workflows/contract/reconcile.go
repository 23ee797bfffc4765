package contract

import (
	"time"
)

// ReconcileEmailsName is the registered name of the activity of Reconcile.
const ReconcileEmailsName = "ReconcileEmails"

// ReconcileInput bounds one reconciliation (see store.StalledEmails).
type ReconcileInput struct {
	// QueuedBefore: emails that never left the queue, were due before
	// this and have no outbox entry are restarted.
	QueuedBefore time.Time
	// SentBefore: emails sent (claimed) and due before this that still
	// have recipients without an outcome are ended `failed`.
	SentBefore time.Time
	// MaxRestarts bounds the restarts of an email; one that needs more is
	// ended `failed`.
	MaxRestarts int
	// Limit bounds the emails examined in one run.
	Limit int
}

// ReconcileResult counts what a reconciliation did.
type ReconcileResult struct {
	Examined  int // emails listed
	Running   int // left alone: their workflow still runs
	Restarted int
	Failed    int // emails ended `failed`
	Errors    int // emails skipped after an error (logged); the next run sees them again
}
