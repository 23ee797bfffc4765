// Package invalid describes a request its caller can fix: which field is
// wrong and a sentence saying why, safe to show to that caller. Each edge
// translates it once: the HTTP API answers 422 with the error body of
// API.md, the dashboard shows the sentence above the form it came from.
package invalid

import "fmt"

// Error is a field value the caller can correct.
type Error struct {
	// Field is the field as the API names it ("name", "events"); "" when
	// the problem is not one field's.
	Field string
	// Missing reports a required field that is absent (API.md:
	// missing_required_field); otherwise the value is wrong
	// (validation_error).
	Missing bool
	// Message names the field and says what is expected.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error about field.
func Errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Missing returns the *Error of an absent required field.
func Missing(field string) *Error {
	return &Error{Field: field, Missing: true, Message: "Missing `" + field + "` field."}
}
