package contract

import "github.com/google/uuid"

// Registered names of the steps SendBatch takes for all its due emails at
// once.
const (
	PrepareBatchName      = "PrepareBatch"
	RecordBatchEventsName = "RecordBatchEvents"
)

// PrepareBatchInput names emails of one batch to prepare together.
type PrepareBatchInput struct{ EmailIDs []string }

// PrepareBatchResult says what PrepareBatch did with each email, in the
// order of the input.
type PrepareBatchResult struct {
	// TeamID owns the emails (a batch is one team's): the PrepareResult.TeamID
	// of each.
	TeamID uuid.UUID `json:",omitzero"`
	Emails []PreparedEmail
}

// PreparedEmail is PrepareBatch's outcome for one email: exactly one of
// Result, Failed and Alone applies.
type PreparedEmail struct {
	EmailID string
	// Result is what Prepare would have returned for the email; its TeamID
	// is left zero (PrepareBatchResult.TeamID holds it).
	Result PrepareResult `json:",omitzero"`
	// Failed: the email can never be sent (Prepare would have failed
	// permanently); the reason to fail it with (FailEmail).
	Failed string `json:",omitempty"`
	// Alone: the email could not be prepared with the others (an error of
	// its own that a retry may clear); the workflow takes it through
	// SendEmail's steps, Prepare included.
	Alone bool `json:",omitempty"`
}

// RecordBatchEventsInput appends events to the histories of several
// emails of one team, in one transaction.
type RecordBatchEventsInput struct {
	// TeamID owns the emails; the TeamID of each RecordEventsInput is left
	// zero.
	TeamID uuid.UUID `json:",omitzero"`
	Emails []RecordEventsInput
}

// PersonalData implements codec.PersonalData: the sandbox and delivery
// recipients of every email.
func (r PrepareBatchResult) PersonalData() (uuid.UUID, []string) {
	var addrs []string
	for _, e := range r.Emails {
		_, a := e.Result.PersonalData()
		addrs = append(addrs, a...)
	}
	return r.TeamID, addrs
}

// PersonalData implements codec.PersonalData: the events' recipients.
func (in RecordBatchEventsInput) PersonalData() (uuid.UUID, []string) {
	var addrs []string
	for _, e := range in.Emails {
		_, a := e.PersonalData()
		addrs = append(addrs, a...)
	}
	return in.TeamID, addrs
}
