package submit

import "fmt"

// Kind classifies a rejection of a submission. Each outward edge (HTTP,
// SMTP) translates a Kind once into its own vocabulary.
type Kind int

const (
	// KindValidation is an invalid field value (HTTP 422 validation_error).
	KindValidation Kind = iota + 1
	// KindMissingField is an absent required field (HTTP 422 missing_required_field).
	KindMissingField
	// KindInvalidParameter is a malformed identifier or address such as a bad
	// `from` (HTTP 422 invalid_parameter).
	KindInvalidParameter
	// KindInvalidAttachment is an attachment without content or path, or one
	// whose content cannot be decoded or fetched (HTTP 422 invalid_attachment).
	KindInvalidAttachment
	// KindForbidden is a sender the team may not use: an unverified domain,
	// a sandbox sender writing to a stranger, a domain-scoped key used for
	// another domain (HTTP 403 validation_error).
	KindForbidden
	// KindTooLarge is a request or built message over a size limit
	// (HTTP 413 or 422 validation_error, depending on what was too large).
	KindTooLarge
	// KindInvalidIdempotencyKey is an idempotency key that is empty or
	// longer than 256 characters (HTTP 400 invalid_idempotency_key).
	KindInvalidIdempotencyKey
	// KindIdempotencyMismatch is an idempotency key reused with another
	// body or endpoint within its lifetime (HTTP 409 invalid_idempotent_request).
	KindIdempotencyMismatch
	// KindIdempotencyInFlight is an idempotency key whose first request is
	// still in progress (HTTP 409 concurrent_idempotent_requests).
	KindIdempotencyInFlight
	// KindMalformedMessage is a message submitted as bytes (SMTP) that is
	// not an RFC 5322 message: its header cannot be read or it has no
	// usable From field (SMTP 554 5.6.0).
	KindMalformedMessage
)

// Error is a rejection the caller can fix. Message is safe to show to the
// caller and names the offending field.
type Error struct {
	Kind    Kind
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error of the given kind about field.
func Errorf(kind Kind, field, format string, args ...any) *Error {
	return &Error{Kind: kind, Field: field, Message: fmt.Sprintf(format, args...)}
}
