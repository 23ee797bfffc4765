package activities

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
)

// FailEmailName is the registered name of FailEmail.
const FailEmailName = "FailEmail"

// FailEmailInput names an email that can never be sent and says why.
type FailEmailInput struct {
	EmailID string
	// Reason is shown to people (API, dashboard, the email.failed webhook).
	Reason string
}

// FailEmail ends every recipient of the email that has no outcome yet as
// `failed` with the reason (store.FailEmail): the outcome of a permanent
// error after acceptance, such as a message that cannot be built or a
// domain key that cannot be opened. Repeating it changes nothing.
func (a *Activities) FailEmail(ctx context.Context, in FailEmailInput) error {
	id, err := uuid.Parse(in.EmailID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad email id", ErrTypePermanent, err)
	}
	n, err := a.store.FailEmail(ctx, id, in.Reason)
	if err != nil {
		return err
	}
	if n > 0 {
		a.logger.Warn("email failed", "email_id", in.EmailID, "recipients", n, "err", in.Reason)
		if a.cfg.Webhooks.Outbox != nil {
			a.cfg.Webhooks.Outbox.Notify()
		}
		if a.metrics != nil {
			a.metrics.EmailEvents.WithLabelValues(EventFailed).Add(float64(n))
		}
	}
	return nil
}

// PermanentReason is the reason to show for a permanent step error, and
// whether err is one (a non-retryable application error of type
// ErrTypePermanent, as classify makes them).
func PermanentReason(err error) (string, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypePermanent {
		return "", false
	}
	return app.Message(), true
}
