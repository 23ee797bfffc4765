package workflows

// Task queues and workflow IDs. Every name a running history depends on is
// defined here, once.

// TaskQueue carries every workflow and its local activities.
const TaskQueue = "posthaste"

// Registered names of workflows.
const (
	SendEmailName = "SendEmail"
)

// DeliverTaskQueue is the task queue of the Deliver activities of a region;
// `posthaste worker --regions` chooses which of them a worker polls.
func DeliverTaskQueue(region string) string { return "posthaste-deliver-" + region }

// EmailWorkflowID is the ID of the SendEmail workflow of an email.
func EmailWorkflowID(emailID string) string { return "email/" + emailID }

// VerifyDomainName is the registered name of the VerifyDomain workflow.
const VerifyDomainName = "VerifyDomain"

// VerifySignalName is the signal that makes VerifyDomain check at once.
const VerifySignalName = "verify"

// DomainVerifyWorkflowID is the ID of the VerifyDomain workflow of a domain.
func DomainVerifyWorkflowID(domainID string) string { return "domain-verify/" + domainID }

// DeliverWebhookName is the registered name of the DeliverWebhook workflow.
const DeliverWebhookName = "DeliverWebhook"

// WebhookWakeSignal tells DeliverWebhook that messages may be due.
const WebhookWakeSignal = "wake"

// WebhookWorkflowID is the ID of the DeliverWebhook workflow of an endpoint.
func WebhookWorkflowID(webhookID string) string { return "webhook/" + webhookID }
