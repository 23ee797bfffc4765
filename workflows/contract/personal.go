package contract

import "github.com/google/uuid"

// The values passed through Temporal that carry recipient addresses
// declare them (codec.PersonalData, asserted in internal/submit/delivery),
// so that the data converter encrypts their payloads under the addresses'
// keys (package codec) and an erasure makes every copy in the histories
// unreadable. Values without a team id (from histories recorded before
// it) stay in the clear.

// PersonalData implements codec.PersonalData: the sandbox and delivery
// recipients.
func (r PrepareResult) PersonalData() (uuid.UUID, []string) {
	var addrs []string
	for _, s := range r.Sandbox {
		addrs = append(addrs, s.Address)
	}
	for _, g := range r.Groups {
		addrs = append(addrs, g.Recipients...)
	}
	return r.TeamID, addrs
}

// PersonalData implements codec.PersonalData: the recipients.
func (in DeliverInput) PersonalData() (uuid.UUID, []string) {
	return in.TeamID, append(outcomeRcpts(in.Answered), in.Recipients...)
}

// PersonalData implements codec.PersonalData: the recipients with
// outcomes.
func (p DeliverProgress) PersonalData() (uuid.UUID, []string) {
	return p.TeamID, outcomeRcpts(p.Outcomes)
}

// PersonalData implements codec.PersonalData: the group's recipients.
func (r DeliverLocalResult) PersonalData() (uuid.UUID, []string) {
	return r.TeamID, append(outcomeRcpts(r.Answered), r.Rcpts...)
}

// PersonalData implements codec.PersonalData: the events' recipients
// (their details may quote them).
func (in RecordEventsInput) PersonalData() (uuid.UUID, []string) {
	var addrs []string
	for _, e := range in.Events {
		if e.Recipient != "" {
			addrs = append(addrs, e.Recipient)
		}
	}
	return in.TeamID, addrs
}

func outcomeRcpts(outcomes []DeliverOutcome) []string {
	addrs := make([]string, 0, len(outcomes))
	for _, o := range outcomes {
		addrs = append(addrs, o.Rcpt)
	}
	return addrs
}
