// Package bounce classifies the failure replies of SMTP servers (RFC 5321
// reply codes, RFC 3463 enhanced status codes and the texts servers send)
// as the bounce types and subtypes Amazon SES names and Resend passes on:
// the same classes for a synchronous failure during delivery and for an
// asynchronous one read from a delivery status notification. It does no
// I/O.
package bounce

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
	Permanent    = "Permanent"
	Transient    = "Transient"
	Undetermined = "Undetermined"

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

// Class is what a failure reply says about a recipient.
type Class struct {
	Type    string // Permanent, Transient or Undetermined
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
func (c Class) Reason() string {
	if c.Type == Undetermined {
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

// Classify classifies a failure reply: its basic code (RFC 5321
// §4.2), its enhanced status code (RFC 3463 §2, "" when the server sent
// none) and its text. The enhanced code decides when it is specific;
// otherwise the text is read for the phrases servers use, and last the
// basic code. A 4xx reply gives a Transient class, never one that
// suppresses; a reply that is no failure at all is Undetermined.
func Classify(code int, enhanced, text string) Class {
	class, subject, detail, ok := SplitStatus(enhanced)
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
		c := Classify(code+100, swapClass(enhanced), text)
		if c.Type == Permanent {
			c.SubType = SubTypeGeneral
		}
		return Class{Type: Transient, SubType: c.SubType}
	default:
		return Class{Type: Undetermined, SubType: SubTypeUndetermined}
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
		return Class{Type: Transient, SubType: SubTypeMessageTooLarge}
	}
	return Class{Type: Permanent, SubType: SubTypeGeneral}
}

// classifyStatus reads an RFC 3463 §3 subject and detail; ok is false when
// they are generic (X.0.0, X.1.0, X.2.0, X.5.0 ...) or absent, leaving the
// decision to the text.
func classifyStatus(subject, detail int, text string) (Class, bool) {
	permanent := func(sub string, suppress bool) (Class, bool) {
		return Class{Type: Permanent, SubType: sub, Suppress: suppress}, true
	}
	transient := func(sub string) (Class, bool) {
		return Class{Type: Transient, SubType: sub}, true
	}
	switch subject {
	case 1: // §3.2 addressing status
		switch detail {
		case 0:
			return Class{}, false
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
			return Class{}, false
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
			return Class{}, false
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
	return Class{}, false
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
func classifyText(text string) (Class, bool) {
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
		return Class{Type: Transient, SubType: SubTypeMailboxFull}, true
	case has(noSuchUserPhrases):
		return Class{Type: Permanent, SubType: SubTypeNoEmail, Suppress: true}, true
	case has(tooLargePhrases):
		return Class{Type: Transient, SubType: SubTypeMessageTooLarge}, true
	case mentionsAttachment(t):
		return Class{Type: Transient, SubType: SubTypeAttachmentRejected}, true
	case has(contentPhrases):
		return Class{Type: Transient, SubType: SubTypeContentRejected}, true
	}
	return Class{}, false
}

func mentionsAttachment(text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(t, "attachment") || strings.Contains(t, "file type") ||
		strings.Contains(t, "executable")
}

// SplitStatus splits an RFC 3463 §2 status code "class.subject.detail"
// (class 2, 4 or 5; subject up to three digits; detail up to three).
func SplitStatus(s string) (class, subject, detail int, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || len(p) > 3 {
			return 0, 0, 0, false
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return 0, 0, 0, false
		}
		n[i] = v
	}
	if n[0] != 2 && n[0] != 4 && n[0] != 5 {
		return 0, 0, 0, false
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
