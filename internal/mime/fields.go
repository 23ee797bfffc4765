package mime

import (
	"errors"
	"fmt"
	stdmime "mime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-message/mail"
)

// The rules for custom header fields live here, once: Build enforces them
// and the API's validator (internal/submit) checks requests against the same
// functions, so that whatever is accepted can be built.

// ValidFieldName reports whether name is an RFC 5322 §3.6.8 field-name:
// one or more printable US-ASCII characters other than colon.
func ValidFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < '!' || c > '~' || c == ':' {
			return false
		}
	}
	return true
}

// ReservedField reports whether a custom header field may not be set by a
// sender, whatever its case: the fields Build writes itself (RFC 5322 §3.6
// allows most of them once), Bcc (which must never reach the header), the
// MIME fields that describe the body Build makes (RFC 2045 §5, §6, RFC 2183,
// RFC 1864), and the fields that only the signer (DKIM-Signature) or
// relaying and receiving MTAs add: Received, Return-Path (RFC 5321 §4.4),
// Authentication-Results (RFC 8601 §5: a receiver trusts the ones its own
// domain added, and a forged one may pass for them) and the ARC-* sets
// (RFC 8617 §4.1: ARC-Seal, ARC-Message-Signature and
// ARC-Authentication-Results, which intermediaries add). Sender is reserved
// too: a message from Posthaste has one author, in From.
//
// Other Content-* fields, such as Content-Language (RFC 3282) or
// Content-Description, describe the message as a whole and are sent as
// given.
func ReservedField(name string) bool {
	name = strings.ToLower(name)
	switch name {
	case "from", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id", "mime-version",
		"content-type", "content-transfer-encoding", "content-disposition", "content-md5", "content-length",
		"sender", "return-path", "received", "dkim-signature", "authentication-results":
		return true
	}
	return TraceField(name)
}

// TraceField reports whether name is a field that mail servers add on the
// way and no sender may set: Received, Return-Path, Authentication-Results
// or any ARC-* field (see ReservedField). DKIM-Signature, which Posthaste's
// signer adds, is not one of them.
func TraceField(name string) bool {
	name = strings.ToLower(name)
	switch name {
	case "received", "return-path", "authentication-results":
		return true
	}
	return strings.HasPrefix(name, "arc-")
}

// CheckFieldValue checks the value of a custom header field: valid UTF-8
// without line breaks (which would inject fields) or other control
// characters (RFC 5322 §3.2.5 unstructured text is printable characters and
// white space; RFC 6532 §3.2 adds UTF-8). Build writes non-ASCII values as
// RFC 2047 encoded-words.
func CheckFieldValue(value string) error {
	if !utf8.ValidString(value) {
		return errors.New("value is not valid UTF-8")
	}
	if strings.ContainsAny(value, "\r\n") {
		return errors.New("value contains CR or LF")
	}
	for _, r := range value {
		if isControl(r) {
			return fmt.Errorf("value contains the control character %U", r)
		}
	}
	return nil
}

// CheckField checks a custom header field as Build does: a valid name that
// is not reserved and a valid value.
func CheckField(name, value string) error {
	switch {
	case name == "":
		return errors.New("empty header name")
	case !ValidFieldName(name):
		return fmt.Errorf("invalid header name %q", name)
	case ReservedField(name):
		return fmt.Errorf("header %q is reserved", name)
	}
	if err := CheckFieldValue(value); err != nil {
		return fmt.Errorf("header %s: %w", name, err)
	}
	return nil
}

// isControl reports whether r is a control character that no header field
// Posthaste sends may hold: any Unicode control (C0, DEL, C1) except the
// horizontal tab, which is white space (RFC 5322 §2.2.2 WSP).
func isControl(r rune) bool {
	return r != '\t' && unicode.IsControl(r)
}

// formatAddress writes an address as net/mail does (a quoted or RFC 2047
// encoded display name, then the angle address), except for a name that
// must be encoded and holds a backslash: net/mail Q-encodes that one,
// leaving the backslash as it is, which RFC 2047 §5(3) does not allow in an
// encoded-word within a phrase, and readers (net/mail among them) then
// cannot parse the field. Such a name is B-encoded instead, as net/mail
// does itself for the other characters §5(3) excludes.
func formatAddress(a mail.Address) string {
	if !strings.Contains(a.Name, "\\") || printableName(a.Name) {
		return a.String()
	}
	return stdmime.BEncoding.Encode("utf-8", a.Name) + " " + (&mail.Address{Address: a.Address}).String()
}

// printableName reports whether net/mail writes name as a quoted string
// rather than encoding it: when it is printable ASCII and white space.
func printableName(name string) bool {
	for _, r := range name {
		if (r < '!' || r > '~') && r != ' ' && r != '\t' {
			return false
		}
	}
	return true
}
