package mta

import (
	"strconv"
	"strings"
)

// Bounce types and subtypes, as Amazon SES names them in its bounce
// notifications and Resend passes them on in the email.bounced webhook
// (https://docs.aws.amazon.com/ses/latest/dg/notification-contents.html#bounce-types).
// A Transient bounce is one that a later, different message to the same
// address may not meet; it still ends this message's delivery.
const (
	BouncePermanent    = "Permanent"
	BounceTransient    = "Transient"
	BounceUndetermined = "Undetermined"

	// SubTypeGeneral is a bounce of no more specific kind.
	SubTypeGeneral = "General"
	// SubTypeNoEmail (Permanent): the address does not exist.
	SubTypeNoEmail = "NoEmail"
	// SubTypeSuppressed (Permanent): not attempted, the address is on a
	// suppression list.
	SubTypeSuppressed = "Suppressed"
	// SubTypeMailboxFull (Transient): the mailbox is over its quota.
	SubTypeMailboxFull = "MailboxFull"
	// SubTypeMessageTooLarge (Transient): the message exceeds a size limit.
	SubTypeMessageTooLarge = "MessageTooLarge"
	// SubTypeContentRejected (Transient): refused for its content or by a
	// policy (spam, authentication, reputation).
	SubTypeContentRejected = "ContentRejected"
	// SubTypeAttachmentRejected (Transient): refused for an attachment.
	SubTypeAttachmentRejected = "AttachmentRejected"
	// SubTypeUndetermined (Undetermined): nothing tells why.
	SubTypeUndetermined = "Undetermined"
)

// BounceClass is what a failure reply says about a recipient.
type BounceClass struct {
	Type    string // BouncePermanent, BounceTransient or BounceUndetermined
	SubType string // one of the SubType constants
	// Suppress is true only for a recipient-level permanent failure: the
	// address does not exist or cannot receive mail (RFC 3463 X.1.x
	// addressing errors other than the sender's, X.2.1, "no such user"
	// texts). Policy, content and size rejections say nothing about the
	// address and never suppress it.
	Suppress bool
}

// Reason words the class for people, as the `message` of a bounce: what
// went wrong, without the reply, which callers append.
func (c BounceClass) Reason() string {
	if c.Type == BounceUndetermined {
		return "The recipient's mail server reported a failure without saying why"
	}
	switch c.SubType {
	case SubTypeNoEmail:
		return "The recipient's address does not exist or accepts no mail"
	case SubTypeMailboxFull:
		return "The recipient's mailbox is full"
	case SubTypeMessageTooLarge:
		return "The message is larger than the recipient's mail server accepts"
	case SubTypeContentRejected:
		return "The recipient's mail server rejected the message for its content or by policy"
	case SubTypeAttachmentRejected:
		return "The recipient's mail server rejected an attachment of the message"
	}
	return "The recipient's mail server rejected the message"
}

// Bounce classifies the reply in r (see ClassifyBounce).
func (r Result) Bounce() BounceClass {
	return ClassifyBounce(r.Code, r.EnhancedCode, r.Message)
}

// ClassifyBounce classifies a failure reply: its basic code (RFC 5321
// §4.2), its enhanced status code (RFC 3463 §2, "" when the server sent
// none) and its text. The enhanced code decides when it is specific;
// otherwise the text is read for the phrases servers use, and last the
// basic code. A 4xx reply gives a Transient class, never one that
// suppresses; a reply that is no failure at all is Undetermined.
func ClassifyBounce(code int, enhanced, text string) BounceClass {
	class, subject, detail, ok := splitStatus(enhanced)
	if !ok || class != code/100 {
		// RFC 3463 §2: the class must agree with the reply code; a code
		// that does not is not trusted.
		subject, detail = -1, -1
	}
	switch code / 100 {
	case 5:
	case 4:
		// Deferred until delivery gave up: the address may well work
		// later.
		c := ClassifyBounce(code+100, swapClass(enhanced), text)
		if c.Type == BouncePermanent {
			c.SubType = SubTypeGeneral
		}
		return BounceClass{Type: BounceTransient, SubType: c.SubType}
	default:
		return BounceClass{Type: BounceUndetermined, SubType: SubTypeUndetermined}
	}
	if c, ok := classifyStatus(subject, detail, text); ok {
		return c
	}
	if c, ok := classifyText(text); ok {
		return c
	}
	switch code {
	case 552:
		// RFC 5321 §4.2.3 "exceeded storage allocation": after DATA,
		// servers that send no enhanced code answer it to a message over
		// their size limit.
		return BounceClass{Type: BounceTransient, SubType: SubTypeMessageTooLarge}
	}
	return BounceClass{Type: BouncePermanent, SubType: SubTypeGeneral}
}

// classifyStatus reads an RFC 3463 §3 subject and detail; ok is false when
// they are generic (X.0.0, X.1.0, X.2.0, X.5.0 ...) or absent, leaving the
// decision to the text.
func classifyStatus(subject, detail int, text string) (BounceClass, bool) {
	permanent := func(sub string, suppress bool) (BounceClass, bool) {
		return BounceClass{Type: BouncePermanent, SubType: sub, Suppress: suppress}, true
	}
	transient := func(sub string) (BounceClass, bool) {
		return BounceClass{Type: BounceTransient, SubType: sub}, true
	}
	switch subject {
	case 1: // §3.2 addressing status
		switch detail {
		case 0:
			return BounceClass{}, false
		case 1, 10:
			// X.1.1 bad destination mailbox address; X.1.10 the domain
			// has a null MX (RFC 7505 §4.2).
			return permanent(SubTypeNoEmail, true)
		case 7, 8:
			// X.1.7 and X.1.8 are about the sender's address: the
			// recipient is not at fault.
			return permanent(SubTypeGeneral, false)
		}
		// X.1.2 no such destination system, X.1.3 bad syntax, X.1.4
		// ambiguous, X.1.6 moved: the address cannot be used.
		return permanent(SubTypeGeneral, true)
	case 2: // §3.3 mailbox status
		switch detail {
		case 1:
			// X.2.1 mailbox disabled, not accepting messages.
			return permanent(SubTypeNoEmail, true)
		case 2:
			return transient(SubTypeMailboxFull)
		case 3:
			// X.2.3 message length exceeds administrative limit.
			return transient(SubTypeMessageTooLarge)
		case 0:
			return BounceClass{}, false
		}
		return permanent(SubTypeGeneral, false)
	case 3: // §3.4 mail system status
		switch detail {
		case 4:
			// X.3.4 message too big for system.
			return transient(SubTypeMessageTooLarge)
		case 1:
			// X.3.1 mail system full.
			return transient(SubTypeGeneral)
		}
		return permanent(SubTypeGeneral, false)
	case 4: // §3.5 network and routing status
		return permanent(SubTypeGeneral, false)
	case 5: // §3.6 mail delivery protocol status
		if detail == 0 {
			return BounceClass{}, false
		}
		return permanent(SubTypeGeneral, false)
	case 6: // §3.7 message content or media status
		if detail == 7 {
			// RFC 6531 §3.7.4.2 / RFC 3463 X.6.7: the address needs
			// SMTPUTF8, which the server lacks; the address itself may
			// be fine.
			return permanent(SubTypeGeneral, false)
		}
		if mentionsAttachment(text) {
			return transient(SubTypeAttachmentRejected)
		}
		return transient(SubTypeContentRejected)
	case 7: // §3.8 security or policy status
		if mentionsAttachment(text) {
			return transient(SubTypeAttachmentRejected)
		}
		return transient(SubTypeContentRejected)
	}
	return BounceClass{}, false
}

// Phrases of reply texts, lower case. Servers that send no enhanced code,
// or a generic one, say what happened in words.
var (
	noSuchUserPhrases = []string{
		"no such user", "user unknown", "unknown user", "no such recipient", "unknown recipient",
		"recipient unknown", "no such mailbox", "mailbox not found", "mailbox does not exist",
		"does not exist", "user not found", "invalid recipient", "invalid mailbox", "address rejected: user",
		"no mailbox here", "account disabled", "account has been disabled", "mailbox disabled",
	}
	mailboxFullPhrases = []string{
		"mailbox full", "mailbox is full", "over quota", "quota exceeded", "insufficient storage",
		"mailbox size limit",
	}
	tooLargePhrases = []string{
		"too large", "too big", "message size", "size limit", "exceeds the maximum size", "message length exceeds",
	}
	contentPhrases = []string{
		"spam", "content", "blocked", "policy", "blacklist", "blocklist", "denylist", "reputation",
		"dmarc", "spf", "dkim", "virus", "malware", "phish", "not authorized", "unsolicited",
	}
)

// classifyText reads a permanent reply's text.
func classifyText(text string) (BounceClass, bool) {
	t := strings.ToLower(text)
	has := func(phrases []string) bool {
		for _, p := range phrases {
			if strings.Contains(t, p) {
				return true
			}
		}
		return false
	}
	switch {
	case has(mailboxFullPhrases):
		return BounceClass{Type: BounceTransient, SubType: SubTypeMailboxFull}, true
	case has(noSuchUserPhrases):
		return BounceClass{Type: BouncePermanent, SubType: SubTypeNoEmail, Suppress: true}, true
	case has(tooLargePhrases):
		return BounceClass{Type: BounceTransient, SubType: SubTypeMessageTooLarge}, true
	case mentionsAttachment(t):
		return BounceClass{Type: BounceTransient, SubType: SubTypeAttachmentRejected}, true
	case has(contentPhrases):
		return BounceClass{Type: BounceTransient, SubType: SubTypeContentRejected}, true
	}
	return BounceClass{}, false
}

func mentionsAttachment(text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(t, "attachment") || strings.Contains(t, "file type") ||
		strings.Contains(t, "executable")
}

// splitStatus splits an RFC 3463 status code "class.subject.detail".
func splitStatus(s string) (class, subject, detail int, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || len(p) > 3 {
			return 0, 0, 0, false
		}
		n[i] = v
	}
	return n[0], n[1], n[2], true
}

// swapClass turns a 4.X.X status code into 5.X.X, so that a deferral is
// read like the permanent failure of the same subject.
func swapClass(enhanced string) string {
	if strings.HasPrefix(enhanced, "4.") {
		return "5" + enhanced[1:]
	}
	return enhanced
}

// Diagnostic returns the RFC 3464 §2.3.6 Diagnostic-Code lines of the reply
// in r, one per line of its text, each "smtp; <code> <enhanced code>
// <text>"; nil when r holds no reply code.
func (r Result) Diagnostic() []string {
	if r.Code == 0 {
		return nil
	}
	prefix := "smtp; " + strconv.Itoa(r.Code)
	if r.EnhancedCode != "" {
		prefix += " " + r.EnhancedCode
	}
	if r.Message == "" {
		return []string{prefix}
	}
	lines := strings.Split(r.Message, "\n")
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(prefix+" "+l, " ")
	}
	return out
}
