package delivery

import (
	"regexp"
	"strings"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/workflows/contract"
)

// The values passed through Temporal that carry recipient addresses
// declare them (their PersonalData methods, in package contract), so that the data converter encrypts their payloads under
// the addresses' keys (package codec) and an erasure makes every copy in
// the histories unreadable. Values without a team id (from histories
// recorded before it) stay in the clear.
var (
	_ codec.PersonalData = contract.PrepareResult{}
	_ codec.PersonalData = contract.DeliverInput{}
	_ codec.PersonalData = contract.DeliverProgress{}
	_ codec.PersonalData = contract.DeliverLocalResult{}
	_ codec.PersonalData = contract.RecordEventsInput{}
)

// withoutAddresses replaces the addresses in s (in any case) by the word
// "recipient", for texts that reach Temporal histories unencrypted, such
// as error messages: an MX's reply often quotes the address it refuses.
func withoutAddresses(s string, addrs []string) string {
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a != "" {
			s = regexp.MustCompile("(?i)"+regexp.QuoteMeta(a)).ReplaceAllLiteralString(s, "recipient")
		}
	}
	return s
}
