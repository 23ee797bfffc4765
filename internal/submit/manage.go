package submit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// ErrUnavailable means a dependency other than the database (Temporal)
// did not answer; nothing was changed and retrying later may work.
var ErrUnavailable = errors.New("dependency unavailable")

// Reschedule moves a scheduled email to the time `scheduledAt` names (the
// forms of ParseScheduledAt). It answers once the new time is committed:
// a GET shows it at once, and a workflow already waiting is woken so it
// waits for the new time instead. Unknown emails are store.ErrNotFound; an
// email that is not scheduled any more (sent, canceled, or never
// scheduled) is an *Error of KindValidation.
func (s *Service) Reschedule(ctx context.Context, from Sender, id uuid.UUID, scheduledAt *string) error {
	if scheduledAt == nil {
		return Errorf(KindMissingField, "scheduled_at", "Missing `scheduled_at` field.")
	}
	at, err := ParseScheduledAt("scheduled_at", *scheduledAt, s.now())
	if err != nil {
		return err
	}
	err = s.store.RescheduleEmail(ctx, from.TeamID, id, at, func(ctx context.Context, ref store.EmailRef) error {
		if s.waker == nil {
			return nil
		}
		if err := s.waker.Wake(ctx, ref, &at); err != nil {
			return fmt.Errorf("%w: waking the workflow of email %s: %w", ErrUnavailable, id, err)
		}
		return nil
	})
	return stateError(err, "rescheduled")
}

// Cancel cancels a scheduled email. It answers once the cancellation is
// committed; the workflow, which re-checks the email's state before
// sending, is woken to finish early (best effort: if that fails it finds
// the email canceled at the scheduled time). Errors as for Reschedule.
func (s *Service) Cancel(ctx context.Context, from Sender, id uuid.UUID) error {
	ref, err := s.store.CancelEmail(ctx, from.TeamID, id)
	if err != nil {
		return stateError(err, "canceled")
	}
	if ref.Started && s.waker != nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := s.waker.Wake(wctx, ref, nil); err != nil {
			s.logger.Warn("waking the workflow of a canceled email", "team_id", from.TeamID, "email_id", id, "err", err)
		}
	}
	return nil
}

// stateError turns a *store.StateError into a validation error saying why.
func stateError(err error, verb string) error {
	var se *store.StateError
	if !errors.As(err, &se) {
		return err
	}
	why := "it has already been sent"
	switch se.LastEvent {
	case store.EventCanceled:
		why = "it was canceled"
	case store.EventQueued:
		why = "it is not scheduled; it is being sent now"
	}
	return Errorf(KindValidation, "scheduled_at", "This email cannot be %s because %s.", verb, why)
}
