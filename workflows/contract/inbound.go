package contract

import (
	"github.com/google/uuid"
)

// ProcessInboundMessageName is the registered name of the activity of
// ProcessInbound.
const ProcessInboundMessageName = "ProcessInboundMessage"

// ProcessInboundInput names a message the inbound MX accepted (an
// inbound_message row).
type ProcessInboundInput struct {
	InboundID uuid.UUID
}

// ProcessInboundResult says what a message was and what it changed.
type ProcessInboundResult struct {
	// Kind is the reports.Kind of the message ("" when the row is gone).
	Kind string
	// EmailID is the email the report was matched to; uuid.Nil when none.
	EmailID uuid.UUID
	// Events counts the events recorded (bounced, delivery_delayed,
	// complained; one already recorded, by an earlier copy of the report,
	// counts but changes nothing), Suppressed the addresses put on the
	// suppression list (likewise).
	Events, Suppressed int
	// Received counts the received emails stored for receiving domains
	// (issue 16 point 4); 0 when they already were.
	Received int
	// Unsubscribed counts the recipients unsubscribed through their
	// mailto unsubscribe addresses (unsubscribeMailto); one unsubscribed
	// already counts but changes nothing.
	Unsubscribed int
}
