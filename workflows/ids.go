package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Task queues, workflow IDs and signal names. Every name a running history
// depends on is defined here, once.

// TaskQueue carries every workflow and its local activities, but for
// ProcessInbound.
const TaskQueue = "posthaste"

// InboundTaskQueue carries the ProcessInbound workflows of received mail
// and their local activities, polled by a worker with slots of its own:
// a flood of received mail waits there and cannot take the slots of
// anyone's sending. ProcessInbound workflows started before it existed
// finish on TaskQueue, where the workflow stays registered.
const InboundTaskQueue = "posthaste-inbound"

// Registered names of workflows.
const (
	SendEmailName = "SendEmail"
	SendBatchName = "SendBatch"
	RetentionName = "Retention"
	ReconcileName = "Reconcile"
)

// WakeSignal wakes the workflow sending an email whose scheduled time was
// moved or that was canceled; its payload is a Wake.
const WakeSignal = "wake"

// RetentionScheduleID is the Temporal Schedule that starts Retention
// daily; its workflows get IDs RetentionScheduleID plus a timestamp.
const RetentionScheduleID = "retention"

// ReconcileScheduleID is the Temporal Schedule that starts Reconcile every
// few minutes.
const ReconcileScheduleID = "reconcile"

// DeliverTaskQueue is the task queue of the Deliver activities of a region
// and an IP pool: only workers that own the pool's addresses poll it.
// pool is "" for the default pool, whose queues keep the names they had
// before pools (running histories name them). `posthaste worker --regions
// --pools` chooses which queues a worker polls.
func DeliverTaskQueue(region, pool string) string {
	if pool == "" {
		return "posthaste-deliver-" + region
	}
	// Neither region nor pool names contain "/" (ippool.ValidName).
	return "posthaste-deliver-" + region + "/" + pool
}

// EmailWorkflowID is the ID of the SendEmail workflow of an email accepted
// without an idempotency key.
func EmailWorkflowID(emailID string) string { return "email/" + emailID }

// VerifyDomainName is the registered name of the VerifyDomain workflow.
const VerifyDomainName = "VerifyDomain"

// VerifySignalName is the signal that makes VerifyDomain check at once.
const VerifySignalName = "verify"

// DomainVerifyWorkflowID is the ID of the VerifyDomain workflow of a domain.
func DomainVerifyWorkflowID(domainID string) string { return "domain-verify/" + domainID }

// RestartEmailWorkflowID is the ID of the n-th restart (n ≥ 1) of the
// SendEmail workflow of an email whose first workflow ended without
// sending it (see Reconcile). A restart never reuses the first ID: the
// starter rejects IDs already used.
func RestartEmailWorkflowID(emailID string, n int) string {
	return "email/" + emailID + "/retry-" + strconv.Itoa(n)
}

// KeyedEmailWorkflowID is the ID of the SendEmail workflow of an email
// accepted with an idempotency key. The email id keeps a key reused after
// its 24 hours from colliding with a workflow that still runs. The key
// appears as KeyInID shows it.
func KeyedEmailWorkflowID(teamID, key, emailID string) string {
	return "email/" + teamID + "/" + KeyInID(key) + "/" + emailID
}

// MaxKeyInID is the longest idempotency key that appears in a workflow ID
// as it is. The keyed IDs then stay within 80 + 160 = 240 bytes: Temporal
// refuses IDs over 1,000 bytes by default, and its SQL persistence keeps
// workflow IDs in 255-character columns.
const MaxKeyInID = 160

// KeyInID is an idempotency key as it appears in a workflow ID: as it is
// when it is at most MaxKeyInID bytes of printable ASCII (such keys went
// into IDs as they are before any key was hashed, so the workflows started
// then are still found), otherwise "h-" and the first 128 bits of its
// SHA-256 in hex. The email or batch id that follows the key in the ID
// keeps two keys from ever sharing an ID, hashed or not. The key itself
// stays in the email row.
func KeyInID(key string) string {
	if len(key) <= MaxKeyInID && printableASCII(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "h-" + hex.EncodeToString(sum[:16])
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// BatchWorkflowID is the ID of the SendBatch workflow of a batch accepted
// without an idempotency key.
func BatchWorkflowID(batchID string) string { return "batch/" + batchID }

// KeyedBatchWorkflowID is the ID of the SendBatch workflow of a batch
// accepted with an idempotency key; the key appears as KeyInID shows it.
func KeyedBatchWorkflowID(teamID, key, batchID string) string {
	return "batch/" + teamID + "/" + KeyInID(key) + "/" + batchID
}

// DeliverWebhookName is the registered name of the DeliverWebhook workflow.
const DeliverWebhookName = "DeliverWebhook"

// WebhookWakeSignal tells DeliverWebhook that messages may be due.
const WebhookWakeSignal = "wake"

// WebhookWorkflowID is the ID of the DeliverWebhook workflow of an endpoint.
func WebhookWorkflowID(webhookID string) string { return "webhook/" + webhookID }

// BroadcastName is the registered name of the Broadcast workflow.
const BroadcastName = "Broadcast"

// BroadcastWorkflowID is the ID of the Broadcast workflow of a broadcast;
// WakeSignal makes it look at the broadcast's status at once.
func BroadcastWorkflowID(broadcastID string) string { return "broadcast/" + broadcastID }

// ContactImportName is the registered name of the ContactImport workflow.
const ContactImportName = "ContactImport"

// ContactImportWorkflowID is the ID of the ContactImport workflow of an
// import.
func ContactImportWorkflowID(importID string) string { return "contact-import/" + importID }

// ProcessInboundName is the registered name of the ProcessInbound workflow.
const ProcessInboundName = "ProcessInbound"

// InboundWorkflowID is the ID of the ProcessInbound workflow of a message
// the inbound MX accepted (an inbound_message id).
func InboundWorkflowID(inboundID string) string { return "inbound/" + inboundID }

// DataRequestName is the registered name of the DataRequest workflow.
const DataRequestName = "DataRequest"

// DataRequestWorkflowID is the ID of the DataRequest workflow of a data
// subject request.
func DataRequestWorkflowID(requestID string) string { return "data-request/" + requestID }
