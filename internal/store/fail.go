package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// FinalStates are the recipient states that end a delivery: nothing moves
// a recipient out of them but feedback (opened, clicked or complained
// after delivered; a late bounce). Opened and clicked are delivered mail
// that the recipient engaged with. Do not modify.
var FinalStates = []string{EventDelivered, EventBounced, EventComplained, EventFailed, EventCanceled, EventSuppressed,
	EventOpened, EventClicked}

// IsFinal reports whether a recipient state ends its delivery.
func IsFinal(state string) bool { return slices.Contains(FinalStates, state) }

// FailEmail ends every recipient of an email that has no outcome yet as
// `failed` with reason (a sentence for people: the API, the dashboard and
// the email.failed webhook show it), through RecordEvents, so the events,
// the recipients' states, last_event and the webhooks move together.
// Recipients that already reached a final state keep it. It returns how
// many recipients it failed; calling it again fails none. ErrNotFound for
// an unknown email.
func (s *Emails) FailEmail(ctx context.Context, id uuid.UUID, reason string) (int, error) {
	var addrs, status []string
	err := s.pool.QueryRow(ctx, `SELECT rcpt_addrs, rcpt_status FROM email WHERE id = @id`,
		pgx.NamedArgs{"id": id}).Scan(&addrs, &status)
	if err != nil {
		return 0, fmt.Errorf("loading recipients of %s: %w", id, mapErr(err))
	}
	var evs []Event
	for i, a := range addrs {
		if IsFinal(status[i]) {
			continue
		}
		evs = append(evs, Event{Type: EventFailed, Recipient: a, Detail: map[string]any{"reason": reason}})
	}
	if err := s.RecordEvents(ctx, id, evs); err != nil {
		return 0, fmt.Errorf("failing email %s: %w", id, err)
	}
	return len(evs), nil
}
