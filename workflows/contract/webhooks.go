package contract

import (
	"time"
)

// DeliverWebhooksName is the registered name of the activity of
// DeliverWebhook.
const DeliverWebhooksName = "DeliverWebhooks"

// DeliverWebhooksInput names the endpoint to deliver to.
type DeliverWebhooksInput struct{ WebhookID string }

// DeliverWebhooksResult tells DeliverWebhook what to do next.
type DeliverWebhooksResult struct {
	// Stop: the endpoint is disabled or deleted.
	Stop bool
	// More: messages are due now (a full batch, or due while delivering).
	More bool
	// NextAt is when the earliest waiting message is due; nil when none waits.
	NextAt *time.Time
}
