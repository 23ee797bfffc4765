package delivery

import (
	"testing"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/workflows/contract"
)

func TestWithoutAddresses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"451 4.7.1 <Bob@Example.test>: greylisted", "451 4.7.1 <recipient>: greylisted"},
		{"452 too many recipients", "452 too many recipients"},
		{"550 bob@example.test and amy+x@example.test unknown", "550 recipient and recipient unknown"},
	} {
		if got := withoutAddresses(c.in, []string{"bob@example.test", "amy+x@example.test", ""}); got != c.want {
			t.Errorf("withoutAddresses(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPersonalDataDeclared: every value of the send path that carries
// addresses declares all of them with its team.
func TestPersonalDataDeclared(t *testing.T) {
	t.Parallel()
	team := uuid.New()
	out := []contract.DeliverOutcome{{Rcpt: "a@x.test"}}
	checks := []struct {
		name string
		v    interface{ PersonalData() (uuid.UUID, []string) }
		want int
	}{
		{"prepare", contract.PrepareResult{TeamID: team, Sandbox: []contract.SandboxRecipient{{Address: "s@posthaste.test"}},
			Groups: []contract.DeliveryGroup{{Recipients: []string{"a@x.test", "b@x.test"}}}}, 3},
		{"deliver input", contract.DeliverInput{TeamID: team, Recipients: []string{"a@x.test", "b@x.test"}, Answered: out}, 3},
		{"progress", contract.DeliverProgress{TeamID: team, Outcomes: out}, 1},
		{"local result", contract.DeliverLocalResult{TeamID: team, Answered: out, Rcpts: []string{"a@x.test"}}, 2},
		{"events", contract.RecordEventsInput{TeamID: team, Events: []contract.EventInput{{Recipient: "a@x.test"}, {Type: "sent"}}}, 1},
		{"prepare batch", contract.PrepareBatchResult{TeamID: team, Emails: []contract.PreparedEmail{
			{Result: contract.PrepareResult{Sandbox: []contract.SandboxRecipient{{Address: "s@posthaste.test"}}}},
			{Result: contract.PrepareResult{Groups: []contract.DeliveryGroup{{Recipients: []string{"a@x.test", "b@x.test"}}}}},
			{Failed: "building message: bad header"},
		}}, 3},
		{"batch events", contract.RecordBatchEventsInput{TeamID: team, Emails: []contract.RecordEventsInput{
			{Events: []contract.EventInput{{Recipient: "a@x.test"}}}, {Events: []contract.EventInput{{Recipient: "b@x.test"}, {Type: "sent"}}},
		}}, 2},
	}
	for _, c := range checks {
		got, addrs := c.v.PersonalData()
		if got != team || len(addrs) != c.want {
			t.Errorf("%s: %v %v", c.name, got, addrs)
		}
	}
}
