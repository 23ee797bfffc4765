package delivery

import (
	"context"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// FailEmail ends every recipient of the email that has no outcome yet as
// `failed` with the reason (store.FailEmail): the outcome of a permanent
// error after acceptance, such as a message that cannot be built or a
// domain key that cannot be opened. Repeating it changes nothing.
func (a *Sending) FailEmail(ctx context.Context, in contract.FailEmailInput) error {
	id, err := uuid.Parse(in.EmailID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad email id", contract.ErrTypePermanent, err)
	}
	n, err := a.emails.FailEmail(ctx, id, in.Reason)
	if err != nil {
		return err
	}
	if n > 0 {
		a.logger.Warn("email failed", "email_id", in.EmailID, "recipients", n, "err", in.Reason)
		if a.outbox != nil {
			a.outbox.Notify()
		}
		if a.metrics != nil {
			a.metrics.EmailEvents.WithLabelValues(store.EventFailed).Add(float64(n))
		}
	}
	return nil
}
