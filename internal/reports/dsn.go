package reports

import (
	"strings"

	"github.com/posthaste/posthaste/internal/bounce"
)

// Action is the RFC 3464 §2.3.3 action of a recipient.
type Action string

// The actions of RFC 3464 §2.3.3.
const (
	ActionFailed    Action = "failed"
	ActionDelayed   Action = "delayed"
	ActionDelivered Action = "delivered"
	ActionRelayed   Action = "relayed"
	ActionExpanded  Action = "expanded"
)

// DSN is a delivery status notification: the per-message fields of RFC
// 3464 §2.2 that matter and one Recipient per per-recipient group (§2.3).
// For a non-standard bounce (KindBounce) the same fields hold what the
// heuristics read from the text.
type DSN struct {
	// ReportingMTA is the MTA that wrote the report ("dns; mx.example.com").
	ReportingMTA string
	// EnvelopeID is Original-Envelope-Id (§2.2.1): the ENVID the sender
	// gave in MAIL FROM (RFC 3461 §4.4).
	EnvelopeID string
	// ArrivalDate is Arrival-Date (§2.2.5), unparsed.
	ArrivalDate string
	// Sender is Postfix's X-Postfix-Sender: the envelope sender of the
	// original message, bare.
	Sender string
	// OriginalMessageID is the original's Message-ID when the report
	// names it among its own fields (Gmail's X-Original-Message-ID).
	OriginalMessageID string
	// Recipients are in report order, at most Limits.MaxRecipients.
	Recipients []Recipient
}

// Recipient is one per-recipient group of a DSN (RFC 3464 §2.3).
type Recipient struct {
	// FinalRecipient is the address the reporting MTA tried (§2.3.2),
	// bare.
	FinalRecipient string
	// OriginalRecipient is the address the sender gave in RCPT TO's
	// ORCPT (§2.3.1), bare; "" when absent.
	OriginalRecipient string
	// Action is lower-cased; a value outside §2.3.3 is kept as it is.
	Action Action
	// Status is the RFC 3463 enhanced status code ("5.1.1"), with any
	// comment dropped; "" when absent.
	Status string
	// DiagnosticCode is the Diagnostic-Code value (§2.3.6) unfolded,
	// "smtp; 550 5.1.1 ..."; for a non-standard bounce, the server's
	// reply as read from the text, written the same way.
	DiagnosticCode string
	// RemoteMTA is Remote-MTA (§2.3.5), "dns; mx.example.com".
	RemoteMTA string
	// LastAttemptDate and WillRetryUntil (§2.3.7, §2.3.8) are unparsed.
	LastAttemptDate string
	WillRetryUntil  string
}

// Address is the address the sender used for this recipient: the original
// recipient when the report gives it, else the final one (which a
// forwarder may have rewritten).
func (r Recipient) Address() string {
	if r.OriginalRecipient != "" {
		return r.OriginalRecipient
	}
	return r.FinalRecipient
}

// Final reports whether the action ends delivery to this recipient.
// Delayed (RFC 3464 §2.3.3: "the reporting MTA has so far been unable to
// deliver or relay the message, but it will continue to attempt to do so")
// is not final; every other action is.
func (r Recipient) Final() bool { return r.Action != ActionDelayed }

// Failed reports whether delivery to this recipient failed for good.
func (r Recipient) Failed() bool { return r.Action == ActionFailed }

// parseDSN reads the body of a message/delivery-status part (RFC 3464
// §2.1): the per-message group, then the per-recipient groups. Groups
// without a Final-Recipient (§2.3.2 requires it) are skipped, as are
// groups past maxRecipients (truncated is then set).
func parseDSN(b []byte, maxRecipients int, truncated *bool) *DSN {
	groups := parseFieldGroups(b, maxRecipients+2, maxHeaderFields)
	d := &DSN{}
	if len(groups) == 0 {
		return d
	}
	first := 0
	if g := groups[0]; g.get("Final-Recipient") == "" && g.get("Original-Recipient") == "" {
		d.ReportingMTA = g.get("Reporting-MTA")
		d.EnvelopeID = g.get("Original-Envelope-Id")
		d.ArrivalDate = g.get("Arrival-Date")
		d.Sender = cleanAddress(g.get("X-Postfix-Sender"))
		d.OriginalMessageID = cleanMessageID(g.get("X-Original-Message-Id"))
		first = 1
	}
	for _, g := range groups[first:] {
		rcpt := cleanAddress(g.get("Final-Recipient"))
		orig := cleanAddress(g.get("Original-Recipient"))
		if rcpt == "" {
			// Some MTAs give only the original recipient.
			rcpt = orig
		}
		if rcpt == "" {
			continue
		}
		if len(d.Recipients) >= maxRecipients {
			*truncated = true
			break
		}
		d.Recipients = append(d.Recipients, Recipient{
			FinalRecipient:    rcpt,
			OriginalRecipient: orig,
			Action:            Action(strings.ToLower(firstWord(g.get("Action")))),
			Status:            statusCode(g.get("Status")),
			DiagnosticCode:    g.get("Diagnostic-Code"),
			RemoteMTA:         g.get("Remote-MTA"),
			LastAttemptDate:   g.get("Last-Attempt-Date"),
			WillRetryUntil:    g.get("Will-Retry-Until"),
		})
	}
	if len(groups) > maxRecipients+1 {
		*truncated = true
	}
	return d
}

// statusCode returns the RFC 3463 code at the start of a Status value,
// which may carry a comment ("5.0.0 (permanent failure)"); "" when there
// is no well-formed code.
func statusCode(v string) string {
	w := firstWord(v)
	if _, _, _, ok := bounce.SplitStatus(w); !ok {
		return ""
	}
	return w
}

func firstWord(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, " \t(;"); i >= 0 {
		v = v[:i]
	}
	return v
}
