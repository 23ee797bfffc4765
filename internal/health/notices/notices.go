// Package notices is the activity of the AccountHealth workflow: it
// evaluates every team's account health (the rules of package health,
// applied and stored by the store) and tells the team's owners of each
// crossing by email. It sits beside package health, not in it, because
// health stays pure: the store imports it, and this activity does I/O
// through the store and reads the errors of accepting mail
// (internal/submit).
package notices

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Store evaluates account health and keeps its notices (*store.Insights).
type Store interface {
	EvaluateHealth(ctx context.Context, now time.Time, window time.Duration, pause bool) ([]store.HealthNotice, error)
	PendingHealthNotices(ctx context.Context, limit int) ([]store.HealthNotice, error)
	MarkHealthNoticeSent(ctx context.Context, id uuid.UUID, emailID *uuid.UUID) error
}

// Mailer sends the email of a notice to its team's owners with an
// idempotency key derived from the notice's id, and returns the id of the
// email (nil, and no error, when the team has no owners). Sending the same
// notice again within 24 hours returns the first email, or a submit.Error
// of KindIdempotencyMismatch when the owners changed in between, or of
// KindIdempotencyInFlight while another process is sending it.
type Mailer interface {
	HealthNotice(ctx context.Context, n store.HealthNotice) (*uuid.UUID, error)
}

// Activities is the activity of the AccountHealth workflow, with its
// dependencies. The worker registers it under its name in
// workflows/contract.
type Activities struct {
	Store Store
	// Mail may be nil: crossings are then only logged.
	Mail   Mailer
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// PendingBatch bounds the notices one evaluation sends; more
// wait for the next one.
const PendingBatch = 100

// CheckAccountHealth evaluates every team's account health
// (store.EvaluateHealth, which stores a notice per crossing with the new
// state), then sends every pending notice to its team's owners: those of
// this evaluation and any left by an earlier one whose send failed or
// whose process died before marking it sent. So each crossing is told
// exactly once even when a process dies or a send fails between the
// evaluation and the email. A notice that cannot be sent is logged and
// stays pending for the next evaluation.
func (h *Activities) CheckAccountHealth(ctx context.Context, in contract.CheckAccountHealthInput) (contract.CheckAccountHealthResult, error) {
	var res contract.CheckAccountHealthResult
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	crossed, err := h.Store.EvaluateHealth(ctx, now(), in.Window, in.Pause)
	if err != nil {
		return res, err
	}
	res.Crossed = len(crossed)
	for _, n := range crossed {
		h.logger().Warn("account health threshold crossed", "team_id", n.TeamID, "metric", n.Crossing.Metric,
			"rate", n.Crossing.Rate, "threshold", n.Crossing.Threshold, "paused", n.Crossing.Paused)
	}
	pending, err := h.Store.PendingHealthNotices(ctx, PendingBatch)
	if err != nil {
		return res, err
	}
	for _, n := range pending {
		if err := h.deliver(ctx, n); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Failed++
			h.logger().Error("sending an account health notice", "team_id", n.TeamID, "notice_id", n.ID, "err", err)
			continue
		}
		res.Sent++
	}
	return res, nil
}

func (h *Activities) logger() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

// deliver sends one pending notice and marks it sent. Sending is
// idempotent (the key is the notice's id), so a notice sent by a process
// that died before marking it, or sent at the same time by another
// process, is replayed instead of sent twice; marking twice is harmless.
// Without a mailer the notice is only logged (when found) and marked sent
// with no email.
func (h *Activities) deliver(ctx context.Context, n store.HealthNotice) error {
	var emailID *uuid.UUID
	if h.Mail != nil {
		id, err := h.Mail.HealthNotice(ctx, n)
		var serr *submit.Error
		switch {
		case errors.As(err, &serr) && serr.Kind == submit.KindIdempotencyInFlight:
			// Another process is sending it now and will mark it.
			h.logger().Debug("account health notice being sent by another process", "team_id", n.TeamID,
				"notice_id", n.ID)
			return nil
		case errors.As(err, &serr) && serr.Kind == submit.KindIdempotencyMismatch:
			// The key holds an email accepted (or, rarely, being accepted by
			// another process) for this notice by an earlier attempt, before
			// the owners or the system sender changed: the notice was sent.
			// Left pending it would fail so until the key expires after 24
			// hours and then go out twice.
			h.logger().Warn("account health notice already sent with other recipients", "team_id", n.TeamID,
				"notice_id", n.ID)
		case err != nil:
			return err
		default:
			emailID = id
		}
	}
	return h.Store.MarkHealthNoticeSent(ctx, n.ID, emailID)
}
