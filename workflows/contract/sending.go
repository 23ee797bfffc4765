package contract

import (
	"time"

	"github.com/google/uuid"
)

// Registered names of the activities of SendEmail and SendBatch.
const (
	PrepareName      = "Prepare"
	LoadBatchName    = "LoadBatch"
	RecordEventsName = "RecordEvents"
	DeliverName      = "Deliver"
	DeliverLocalName = "DeliverLocal"
	FailEmailName    = "FailEmail"
)

// Event types recorded by workflows (the values of store.Event.Type).
const (
	EventSent            = "sent"
	EventDelivered       = "delivered"
	EventDeliveryDelayed = "delivery_delayed"
	EventBounced         = "bounced"
	EventComplained      = "complained"
	EventSuppressed      = "suppressed"
	EventFailed          = "failed"
)

// PrepareInput names the email to prepare.
type PrepareInput struct{ EmailID string }

// SandboxRecipient is a sandbox address and the events it simulates.
type SandboxRecipient struct {
	Address string
	Events  []string
}

// DeliveryGroup is the recipients of one domain, delivered together.
type DeliveryGroup struct {
	Domain string
	Region string // delivery region of the sender domain: the task queue of Deliver
	// Pool is the IP pool the mail leaves from (the domain's, else the
	// team's), which with Region names Deliver's task queue
	// (workflows.DeliverTaskQueue); "" is the default pool, and in
	// histories from before pools.
	Pool string `json:",omitempty"`
	// Local: the workflow's worker serves the delivery queue of Region
	// and Pool, so the first delivery attempt may run as a local activity
	// (DeliverLocal). False in histories from before it.
	Local      bool   `json:",omitempty"`
	TLS        string // TLS mode of the sender domain
	ReturnPath string // envelope sender (VERP)
	Recipients []string
	// First is the group's first delivery attempt, which Prepare made
	// itself when the group is Local: the workflow takes it as the
	// result of DeliverLocal and does not run one. Nil in histories
	// from before it, and when Prepare made no attempt.
	First *DeliverLocalResult `json:",omitempty"`
}

// PrepareResult tells the workflow what to do next.
type PrepareResult struct {
	// TeamID owns the email: the workflow passes it on to Deliver and
	// RecordEvents, whose inputs carry addresses (codec.PersonalData).
	// uuid.Nil in histories from before it.
	TeamID uuid.UUID `json:",omitzero"`
	Skip   bool      // canceled meanwhile: nothing to send
	// NotDue is set when the email was rescheduled to a later time: wait
	// until then and prepare again. Nothing else is set.
	NotDue  *time.Time
	Sandbox []SandboxRecipient
	Groups  []DeliveryGroup
}

// RecordEventsInput appends events to an email's history.
type RecordEventsInput struct {
	EmailID string
	// TeamID owns the email (PrepareResult.TeamID); uuid.Nil in histories
	// from before it, whose inputs stay unencrypted.
	TeamID uuid.UUID `json:",omitzero"`
	Events []EventInput
}

// EventInput is one event; Recipient is empty for events of the whole email.
type EventInput struct {
	Type      string
	Recipient string
	Detail    map[string]any
}

// LoadBatchInput names a batch.
type LoadBatchInput struct{ BatchID string }

// BatchEmail is one email of a batch and its scheduled time, if any.
type BatchEmail struct {
	EmailID     string
	ScheduledAt *time.Time
}

// LoadBatchResult lists a batch's emails in request order.
type LoadBatchResult struct{ Emails []BatchEmail }

// DeliverInput names the recipients of one domain to deliver to.
type DeliverInput struct {
	EmailID string
	// TeamID owns the email (PrepareResult.TeamID); uuid.Nil in histories
	// from before it, whose inputs stay unencrypted.
	TeamID     uuid.UUID `json:",omitzero"`
	Domain     string
	Recipients []string
	TLS        string
	ReturnPath string // "" in histories from before domains: the sandbox return path
	// Region is the sender domain's delivery region (DeliveryGroup.Region);
	// DeliverLocal delivers only when its worker serves it. "" in histories
	// from before DeliverLocal.
	Region string `json:",omitempty"`
	// Pool is the IP pool to deliver from (DeliveryGroup.Pool): "" the
	// default pool, and in histories from before pools.
	Pool string `json:",omitempty"`
	// Answered are final outcomes that an earlier attempt run as a local
	// activity (DeliverLocal) got from the MX but could not record: Deliver
	// records them and does not send to those recipients again, as it
	// does with its heartbeat details. Nil in histories from before
	// DeliverLocal.
	Answered []DeliverOutcome `json:",omitempty"`
}

// DeliverProgress is Deliver's heartbeat details: the final outcomes
// (delivered, bounced) that MX hosts gave in this and earlier attempts.
// They reach the Temporal server as soon as the MX answers, before
// PostgreSQL records them, so that the retry of an attempt that crashed or
// met a database outage in between records them instead of sending again.
type DeliverProgress struct {
	// TeamID is DeliverInput.TeamID, which encrypts the details.
	TeamID   uuid.UUID `json:",omitzero"`
	Outcomes []DeliverOutcome
}

// DeliverOutcome is one recipient's final outcome: an mta.Result and when
// it came.
type DeliverOutcome struct {
	Rcpt         string
	Status       string // mta.Status.String(): "delivered" or "bounced"
	Code         int
	EnhancedCode string
	Message      string
	RemoteServer string
	// SourceIP is the address the delivery left from (mta.Result); empty
	// in histories from before pools.
	SourceIP string `json:",omitempty"`
	At       time.Time
}

// DeliverLocalResult is the result of DeliverLocal.
type DeliverLocalResult struct {
	// Done: every recipient of the group has its final outcome recorded.
	Done bool
	// Retry says why the attempt did not finish, when it did not.
	Retry string
	// Answered are the final outcomes the attempt got from the MX, for
	// the regular Deliver that takes over to record without sending again
	// (DeliverInput.Answered); set when the attempt did not finish.
	Answered []DeliverOutcome
	// TeamID is DeliverInput.TeamID; with Rcpts (the group's recipients,
	// which Retry may quote) it encrypts the result in the history.
	TeamID uuid.UUID `json:",omitzero"`
	// Rcpts is set by DeliverLocal for PersonalData and never leaves the
	// worker.
	Rcpts []string `json:"-"`
	// Permanent is why the attempt failed permanently (the message or
	// its route can never be sent): only in DeliveryGroup.First, as
	// DeliverLocal returns such a failure as its error.
	Permanent string `json:",omitempty"`
}

// FailEmailInput names an email that can never be sent and says why.
type FailEmailInput struct {
	EmailID string
	// Reason is shown to people (API, dashboard, the email.failed webhook).
	Reason string
}
