package workflows

// Task queues, workflow IDs and signal names. Every name a running history
// depends on is defined here, once.

// TaskQueue carries every workflow and its local activities.
const TaskQueue = "posthaste"

// Registered names of workflows.
const (
	SendEmailName = "SendEmail"
	SendBatchName = "SendBatch"
	RetentionName = "Retention"
)

// WakeSignal wakes the workflow sending an email whose scheduled time was
// moved or that was canceled; its payload is a Wake.
const WakeSignal = "wake"

// RetentionScheduleID is the Temporal Schedule that starts Retention
// daily; its workflows get IDs RetentionScheduleID plus a timestamp.
const RetentionScheduleID = "retention"

// DeliverTaskQueue is the task queue of the Deliver activities of a region;
// `posthaste worker --regions` chooses which of them a worker polls.
func DeliverTaskQueue(region string) string { return "posthaste-deliver-" + region }

// EmailWorkflowID is the ID of the SendEmail workflow of an email accepted
// without an idempotency key.
func EmailWorkflowID(emailID string) string { return "email/" + emailID }

// VerifyDomainName is the registered name of the VerifyDomain workflow.
const VerifyDomainName = "VerifyDomain"

// VerifySignalName is the signal that makes VerifyDomain check at once.
const VerifySignalName = "verify"

// DomainVerifyWorkflowID is the ID of the VerifyDomain workflow of a domain.
func DomainVerifyWorkflowID(domainID string) string { return "domain-verify/" + domainID }

// KeyedEmailWorkflowID is the ID of the SendEmail workflow of an email
// accepted with an idempotency key. The email id keeps a key reused after
// its 24 hours from colliding with a workflow that still runs.
func KeyedEmailWorkflowID(teamID, key, emailID string) string {
	return "email/" + teamID + "/" + key + "/" + emailID
}

// BatchWorkflowID is the ID of the SendBatch workflow of a batch accepted
// without an idempotency key.
func BatchWorkflowID(batchID string) string { return "batch/" + batchID }

// KeyedBatchWorkflowID is the ID of the SendBatch workflow of a batch
// accepted with an idempotency key.
func KeyedBatchWorkflowID(teamID, key, batchID string) string {
	return "batch/" + teamID + "/" + key + "/" + batchID
}

// DeliverWebhookName is the registered name of the DeliverWebhook workflow.
const DeliverWebhookName = "DeliverWebhook"

// WebhookWakeSignal tells DeliverWebhook that messages may be due.
const WebhookWakeSignal = "wake"

// WebhookWorkflowID is the ID of the DeliverWebhook workflow of an endpoint.
func WebhookWorkflowID(webhookID string) string { return "webhook/" + webhookID }
