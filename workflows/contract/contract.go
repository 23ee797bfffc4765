// Package contract is what workflows and activities agree on: the
// registered name of every activity and the types of its input and
// output, whose JSON field names are recorded in the histories of running
// workflows and must never change. It does no I/O and imports nothing that
// does (TestNoIO in package workflows), so that workflows depend on it
// alone. Package activities implements the activities of sending,
// received mail and the sweeps; those of the other workflows live in the
// package of their area (internal/domains, imports, broadcast, datareq,
// webhook).
package contract

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// ErrTypePermanent marks an application error that retrying cannot fix.
const ErrTypePermanent = "Permanent"

// Permanent returns err as an error that retrying cannot fix: a
// non-retryable application error of type ErrTypePermanent whose message,
// err's text, is the reason shown for the failure. Nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePermanent, err)
}

// PermanentReason is the reason to show for a permanent step error, and
// whether err is one (a non-retryable application error of type
// ErrTypePermanent).
func PermanentReason(err error) (string, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypePermanent {
		return "", false
	}
	return app.Message(), true
}

// BounceDetail is the detail of a bounced event: Resend's bounce object
// (store.Bounce) with an SES bounce type and subtype (bounce.Permanent, bounce.Transient,
// bounce.SubType*), a message for people and the RFC 3464 diagnostic lines of
// the reply ("smtp; 550 5.1.1 ..."; none when no server replied).
func BounceDetail(typ, subType, message string, diagnostic []string) map[string]any {
	if diagnostic == nil {
		diagnostic = []string{}
	}
	return map[string]any{"type": typ, "subType": subType, "message": message, "diagnosticCode": diagnostic}
}
