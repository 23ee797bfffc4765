package workflows

// Task queues and workflow IDs. Every name a running history depends on is
// defined here, once.

// TaskQueue carries every workflow and its local activities.
const TaskQueue = "posthaste"

// Registered names of workflows.
const (
	SendEmailName = "SendEmail"
	RetentionName = "Retention"
)

// RetentionScheduleID is the Temporal Schedule that starts Retention
// daily; its workflows get IDs RetentionScheduleID plus a timestamp.
const RetentionScheduleID = "retention"

// DeliverTaskQueue is the task queue of the Deliver activities of a region;
// `posthaste worker --regions` chooses which of them a worker polls.
func DeliverTaskQueue(region string) string { return "posthaste-deliver-" + region }

// EmailWorkflowID is the ID of the SendEmail workflow of an email.
func EmailWorkflowID(emailID string) string { return "email/" + emailID }
