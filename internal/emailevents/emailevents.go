// Package emailevents records what is learnt about a sent email after it
// was accepted: its events, and the addresses whose bounce said they are
// bad, which go on the team's suppression list. Two slices learn such
// things, the delivery activities (internal/submit/delivery) and the
// activities of received reports (internal/receiving); both record through
// one Recorder so that an event is stored, counted and handed to the
// webhook outbox the same way whichever of them saw it.
package emailevents

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
)

// Notifier wakes the webhook outbox of this process.
type Notifier interface{ Notify() }

// Recorder records events and suppressions of emails. Outbox and Metrics
// may be nil.
type Recorder struct {
	Emails  *store.Emails
	Outbox  Notifier
	Metrics *telemetry.Metrics
}

// Record stores events of email id (with the webhook messages they queue,
// in one transaction), wakes the outbox and counts them.
func (r Recorder) Record(ctx context.Context, id uuid.UUID, evs []store.Event) error {
	if err := r.Emails.RecordEvents(ctx, id, evs); err != nil {
		return err
	}
	if r.Outbox != nil {
		// The events may have queued webhook messages.
		r.Outbox.Notify()
	}
	if r.Metrics != nil {
		for _, e := range evs {
			r.Metrics.EmailEvents.WithLabelValues(e.Type).Inc()
		}
	}
	return nil
}

// RecordMany is Record for the events of several emails, stored in one
// transaction (store.Emails.RecordManyEvents).
func (r Recorder) RecordMany(ctx context.Context, events []store.EmailEvents) error {
	if err := r.Emails.RecordManyEvents(ctx, events); err != nil {
		return err
	}
	if r.Outbox != nil {
		r.Outbox.Notify()
	}
	if r.Metrics != nil {
		for _, e := range events {
			for _, ev := range e.Events {
				r.Metrics.EmailEvents.WithLabelValues(ev.Type).Inc()
			}
		}
	}
	return nil
}

// SuppressBounced puts addresses of e whose bounce said the address itself
// is bad on the team's suppression list, so later sends to them are not
// attempted. Sandbox addresses never enter the list.
func (r Recorder) SuppressBounced(ctx context.Context, e store.Email, addrs []string) error {
	for _, addr := range addrs {
		if _, ok := sandbox.Outcome(addr); ok {
			continue
		}
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		emailID := e.ID
		if _, _, err := r.Emails.AddSuppression(ctx, store.Suppression{ID: id, TeamID: e.TeamID, Email: addr,
			Reason: store.SuppressionBounce, EmailID: &emailID}); err != nil {
			return fmt.Errorf("suppressing a bounced address of %s: %w", e.ID, err)
		}
	}
	return nil
}
