package broadcast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/unsubscribe"
)

// Waker wakes the Broadcast workflow of a broadcast, so that a canceled
// one ends at once rather than when its timer fires. A broadcast without
// a workflow is not an error.
type Waker interface {
	WakeBroadcast(ctx context.Context, id uuid.UUID) error
}

// Notifier is told that outbox entries were written (the outbox
// dispatcher), so that a broadcast sent now starts now.
type Notifier interface{ Notify() }

// Config wires a Service. Store and Submit are required.
type Config struct {
	Store  *store.Store
	Submit *submit.Service
	// Waker may be nil (a process without Temporal): a canceled broadcast
	// then ends when its workflow next looks.
	Waker Waker
	// Outbox may be nil: the broadcast's workflow then starts at the
	// dispatcher's next poll.
	Outbox Notifier
	Logger *slog.Logger // nil discards
}

// Service is what the HTTP API and the dashboard do with broadcasts:
// create, edit, send (now or scheduled), cancel and test them.
type Service struct {
	store  *store.Store
	submit *submit.Service
	waker  Waker
	outbox Notifier
	logger *slog.Logger
	now    func() time.Time
}

// NewService returns a Service.
func NewService(cfg Config) *Service {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: cfg.Store, submit: cfg.Submit, waker: cfg.Waker, outbox: cfg.Outbox,
		logger: logger.With("component", "broadcast"), now: time.Now}
}

// Properties returns the team's contact properties as rendering needs
// them.
func (s *Service) Properties(ctx context.Context, teamID uuid.UUID) ([]Property, error) {
	return Properties(ctx, s.store.Audience, teamID)
}

// Properties returns the team's contact properties from st as rendering
// needs them.
func Properties(ctx context.Context, st *store.Audience, teamID uuid.UUID) ([]Property, error) {
	byKey, err := st.ContactPropertiesByKey(ctx, teamID)
	if err != nil {
		return nil, fmt.Errorf("loading contact properties: %w", err)
	}
	out := make([]Property, 0, len(byKey))
	for k, p := range byKey {
		prop := Property{Key: k}
		if p.Fallback != nil {
			v := propertyText(p.Fallback)
			prop.Fallback = &v
		}
		out = append(out, prop)
	}
	return out, nil
}

// Create stores a new broadcast from e and, with send, sends it at once
// or at scheduledAt (ISO 8601 or natural language, as for emails; only
// with send). A broadcast that cannot be sent is refused before anything
// is stored.
func (s *Service) Create(ctx context.Context, from submit.Sender, e Edit, send bool, scheduledAt string) (store.Broadcast, error) {
	if scheduledAt != "" && !send {
		return store.Broadcast{}, invalid.Errorf("scheduled_at", "The `scheduled_at` field can only be used with `send: true`.")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Broadcast{}, err
	}
	b := store.Broadcast{ID: id, TeamID: from.TeamID, ReplyTo: []string{}}
	if err := e.Apply(&b, true); err != nil {
		return store.Broadcast{}, err
	}
	var at *time.Time
	if send {
		if at, err = s.scheduleTime(scheduledAt); err != nil {
			return store.Broadcast{}, err
		}
		if err := s.checkSend(ctx, from, b); err != nil {
			return store.Broadcast{}, err
		}
	}
	created, err := s.store.Broadcasts.CreateBroadcast(ctx, b)
	if err != nil || !send {
		return created, err
	}
	return s.send(ctx, from, id, at)
}

// Update applies e to one of the team's drafts.
func (s *Service) Update(ctx context.Context, teamID, id uuid.UUID, e Edit) (store.Broadcast, error) {
	return s.store.Broadcasts.UpdateBroadcast(ctx, teamID, id, func(b *store.Broadcast) error { return e.Apply(b, false) })
}

// Send sends one of the team's drafts now, or at scheduledAt when it is
// not empty.
func (s *Service) Send(ctx context.Context, from submit.Sender, id uuid.UUID, scheduledAt string) (store.Broadcast, error) {
	at, err := s.scheduleTime(scheduledAt)
	if err != nil {
		return store.Broadcast{}, err
	}
	return s.send(ctx, from, id, at)
}

// send sends the draft id at at (nil: now) and tells the outbox.
func (s *Service) send(ctx context.Context, from submit.Sender, id uuid.UUID, at *time.Time) (store.Broadcast, error) {
	b, err := s.store.Broadcasts.SendBroadcast(ctx, from.TeamID, id, at, func(b store.Broadcast) error { return s.checkSend(ctx, from, b) })
	if err == nil && s.outbox != nil {
		s.outbox.Notify()
	}
	return b, err
}

// Cancel cancels one of the team's broadcasts that is scheduled or under
// way, and wakes its workflow so that it ends now.
func (s *Service) Cancel(ctx context.Context, teamID, id uuid.UUID) (store.Broadcast, error) {
	b, err := s.store.Broadcasts.CancelBroadcast(ctx, teamID, id)
	if err != nil {
		return store.Broadcast{}, err
	}
	if s.waker != nil {
		// The cancel has committed: the workflow hands over no further
		// chunk whether or not it hears of it now.
		if err := s.waker.WakeBroadcast(ctx, id); err != nil {
			s.logger.Warn("waking canceled broadcast", "broadcast_id", id, "err", err)
		}
	}
	return b, nil
}

func (s *Service) scheduleTime(scheduledAt string) (*time.Time, error) {
	if scheduledAt == "" {
		return nil, nil
	}
	at, err := submit.ParseScheduledAt("scheduled_at", scheduledAt, s.now())
	if err != nil {
		return nil, err
	}
	return &at, nil
}

// checkSend refuses a broadcast that cannot be sent: incomplete, using
// variables no contact can fill, or from a sender the team may not use.
func (s *Service) checkSend(ctx context.Context, from submit.Sender, b store.Broadcast) error {
	props, err := s.Properties(ctx, b.TeamID)
	if err != nil {
		return err
	}
	if err := CheckSendable(b, props); err != nil {
		return err
	}
	_, _, err = s.submit.AuthorizeSender(ctx, from, b.From, "from")
	return err
}

// TestSubject prefixes the subject of a test send.
const TestSubject = "[Test] "

// SendTest sends one email of b, as it is now (a draft included), to
// address, rendered with the team's contact for that address if there is
// one: the way a marketer checks a broadcast in their own inbox. The
// unsubscribe link of a test leads nowhere. It goes through the send path
// like any email (the sandbox sender may write to the team's members).
func (s *Service) SendTest(ctx context.Context, from submit.Sender, b store.Broadcast, address string) (uuid.UUID, error) {
	if b.From == "" {
		return uuid.Nil, invalid.Missing("from")
	}
	if b.HTML == nil && b.Text == nil {
		return uuid.Nil, invalid.Errorf("html", "The broadcast has no content yet.")
	}
	c := store.BroadcastContact{Email: address}
	ct, err := s.store.Audience.Contact(ctx, b.TeamID, store.ContactRef{Email: address})
	switch {
	case err == nil:
		c = store.BroadcastContact{ID: ct.ID, Email: ct.Email, FirstName: ct.FirstName, LastName: ct.LastName,
			Properties: ct.Properties}
	case !errors.Is(err, store.ErrNotFound):
		return uuid.Nil, fmt.Errorf("reading contact: %w", err)
	}
	props, err := s.Properties(ctx, b.TeamID)
	if err != nil {
		return uuid.Nil, err
	}
	r, err := Render(b, c, props)
	if err != nil {
		return uuid.Nil, invalid.Errorf("html", "The broadcast cannot be rendered for %s: %s.", address, err)
	}
	subject := TestSubject + unsubscribe.ReplacePlaceholders(r.Subject, "#")
	req := submit.SendRequest{From: b.From, To: submit.AddressList{address}, ReplyTo: submit.AddressList(b.ReplyTo),
		Subject: &subject}
	if r.HTML != nil {
		h := unsubscribe.ReplacePlaceholders(*r.HTML, "#")
		req.HTML = &h
	}
	if r.Text != nil {
		t := unsubscribe.ReplacePlaceholders(*r.Text, "#")
		req.Text = &t
	}
	return s.submit.Send(ctx, from, req)
}
