package bounce

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClassifyBounce follows RFC 3463 §3 subject by subject and the SES
// bounce types; replies in the texts are real ones (Gmail, Outlook,
// Yahoo, Postfix) or this client's own.
func TestClassifyBounce(t *testing.T) {
	perm := func(sub string, suppress bool) Class {
		return Class{Type: Permanent, SubType: sub, Suppress: suppress}
	}
	trans := func(sub string) Class { return Class{Type: Transient, SubType: sub} }
	for _, tc := range []struct {
		name     string
		code     int
		enhanced string
		text     string
		want     Class
	}{
		// X.1.x addressing: recipient-level, suppressed, except the sender's.
		{"gmail no such account", 550, "5.1.1", "The email account that you tried to reach does not exist.", perm(SubTypeNoEmail, true)},
		{"postfix user unknown", 550, "5.1.1", "<a@x.test>: Recipient address rejected: User unknown in virtual mailbox table", perm(SubTypeNoEmail, true)},
		{"null MX (RFC 7505)", 556, "5.1.10", "domain x.test accepts no mail (null MX)", perm(SubTypeNoEmail, true)},
		{"no such domain", 550, "5.1.2", "domain x.test has no MX or address records", perm(SubTypeGeneral, true)},
		{"bad recipient syntax", 553, "5.1.3", "recipient address: missing @", perm(SubTypeGeneral, true)},
		{"mailbox moved", 550, "5.1.6", "mailbox has moved", perm(SubTypeGeneral, true)},
		{"bad sender syntax is not the recipient's fault", 553, "5.1.7", "sender address: bad", perm(SubTypeGeneral, false)},
		{"bad sender system", 550, "5.1.8", "sender domain does not resolve", perm(SubTypeGeneral, false)},
		{"generic addressing code reads the text", 550, "5.1.0", "Address rejected", perm(SubTypeGeneral, false)},
		{"generic addressing code, no such user", 550, "5.1.0", "no such user here", perm(SubTypeNoEmail, true)},

		// X.2.x mailbox.
		{"mailbox disabled", 550, "5.2.1", "The email account that you tried to reach is disabled.", perm(SubTypeNoEmail, true)},
		{"mailbox full", 552, "5.2.2", "The email account that you tried to reach is over quota.", trans(SubTypeMailboxFull)},
		{"administrative length limit", 552, "5.2.3", "message exceeds the administrative limit", trans(SubTypeMessageTooLarge)},
		{"mailing list expansion", 550, "5.2.4", "list expansion failed", perm(SubTypeGeneral, false)},
		{"generic mailbox code with a full mailbox text", 550, "5.2.0", "Mailbox is full", trans(SubTypeMailboxFull)},

		// X.3.x mail system.
		{"message too big for system", 552, "5.3.4", "Message size exceeds fixed limit", trans(SubTypeMessageTooLarge)},
		{"mail system full", 552, "5.3.1", "mail system full", trans(SubTypeGeneral)},
		{"system not accepting", 550, "5.3.2", "system not accepting network messages", perm(SubTypeGeneral, false)},

		// X.4.x routing and X.5.x protocol say nothing about the address.
		{"unable to route", 550, "5.4.4", "unable to route", perm(SubTypeGeneral, false)},
		{"Exchange Online access denied", 550, "5.4.1", "Recipient address rejected: Access denied", perm(SubTypeGeneral, false)},
		{"invalid command", 554, "5.5.1", "invalid command", perm(SubTypeGeneral, false)},
		{"outlook generic protocol code", 550, "5.5.0", "Requested action not taken: mailbox unavailable", perm(SubTypeGeneral, false)},

		// X.6.x content.
		{"media not supported", 554, "5.6.1", "media type not supported", trans(SubTypeContentRejected)},
		{"UTF-8 headers (RFC 6531)", 554, "5.6.9", "the message headers need SMTPUTF8", trans(SubTypeContentRejected)},
		{"UTF-8 address is not the address's fault", 553, "5.6.7", "the recipient address needs SMTPUTF8", perm(SubTypeGeneral, false)},
		{"attachment type", 554, "5.6.0", "Attachment of type .exe not allowed", trans(SubTypeAttachmentRejected)},

		// X.7.x policy: rejected, never suppressed.
		{"gmail spam", 550, "5.7.1", "Our system has detected that this message is likely unsolicited mail.", trans(SubTypeContentRejected)},
		{"DMARC", 550, "5.7.26", "Unauthenticated email from x.test is not accepted due to domain's DMARC policy.", trans(SubTypeContentRejected)},
		{"relaying denied", 554, "5.7.1", "Relay access denied", trans(SubTypeContentRejected)},
		{"gmail blocked attachment", 552, "5.7.0", "This message was blocked because its content presents a potential security issue. Review our attachment guidelines.", trans(SubTypeAttachmentRejected)},
		{"policy code beats a user-unknown text", 550, "5.7.1", "No such user or spam", trans(SubTypeContentRejected)},

		// No enhanced code: the text, then the basic code.
		{"yahoo no account", 554, "", "delivery error: dd This user doesn't have a yahoo.com account (a@yahoo.com) [0] - does not exist", perm(SubTypeNoEmail, true)},
		{"plain user unknown", 550, "", "User unknown", perm(SubTypeNoEmail, true)},
		{"plain quota", 550, "", "Mailbox quota exceeded", trans(SubTypeMailboxFull)},
		{"plain 552", 552, "", "Requested mail action aborted: exceeded storage allocation", trans(SubTypeMessageTooLarge)},
		{"554 content", 554, "", "Message rejected: spam content detected", trans(SubTypeContentRejected)},
		{"plain too large", 554, "", "Message too large", trans(SubTypeMessageTooLarge)},
		{"plain attachment", 550, "", "Executable attachments are not accepted", trans(SubTypeAttachmentRejected)},
		{"plain 550", 550, "", "Requested action not taken", perm(SubTypeGeneral, false)},
		{"plain 554", 554, "", "Transaction failed", perm(SubTypeGeneral, false)},
		{"class mismatch ignores the code", 550, "4.2.2", "Requested action not taken", perm(SubTypeGeneral, false)},
		{"malformed enhanced code ignored", 550, "5.x.1", "nope", perm(SubTypeGeneral, false)},

		// Deferrals (delivery gave up) are Transient and never suppress.
		{"deferred, full", 452, "4.2.2", "mailbox full", trans(SubTypeMailboxFull)},
		{"deferred greylisting", 451, "4.7.1", "greylisted", trans(SubTypeContentRejected)},
		{"deferred unknown user", 450, "4.1.1", "user unknown, try later", trans(SubTypeGeneral)},
		{"deferred, no host reachable", 451, "4.4.1", "no host reachable", trans(SubTypeGeneral)},

		// Not a failure reply at all.
		{"no reply", 0, "", "", Class{Type: Undetermined, SubType: SubTypeUndetermined}},
		{"success code", 250, "2.0.0", "ok", Class{Type: Undetermined, SubType: SubTypeUndetermined}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Classify(tc.code, tc.enhanced, tc.text))
		})
	}
}
