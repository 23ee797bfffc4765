package submit

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
)

// Emails is the rest of sending beside Service (which accepts,
// reschedules and cancels): reading a team's emails and keeping its
// suppression list. The API and the dashboard read and change these only
// through it. Errors: *invalid.Error (or *Error of KindInvalidParameter)
// for bad input, store.ErrNotFound for what the team does not have.
// Safe for concurrent use.
type Emails struct {
	store *store.Emails
}

// NewEmails returns the Emails of a store's sending area.
func NewEmails(st *store.Emails) *Emails { return &Emails{store: st} }

// List lists the team's emails, newest first.
func (s *Emails) List(ctx context.Context, team uuid.UUID, p store.Page) ([]store.Email, bool, error) {
	return s.store.ListEmails(ctx, team, p)
}

// ListFiltered lists the team's emails that f selects, newest first.
func (s *Emails) ListFiltered(ctx context.Context, team uuid.UUID, f store.EmailFilter, p store.Page) ([]store.Email, bool, error) {
	return s.store.ListEmailsFiltered(ctx, team, f, p)
}

// SenderDomains lists the domains the team's emails were sent from.
func (s *Emails) SenderDomains(ctx context.Context, team uuid.UUID) ([]string, error) {
	return s.store.SenderDomains(ctx, team)
}

// Get returns the team's email with this id.
func (s *Emails) Get(ctx context.Context, team, id uuid.UUID) (store.Email, error) {
	return s.store.GetEmail(ctx, team, id)
}

// GetWithBounces returns the team's email with this id and, when some of
// its recipients bounced, their bounces by address (nil otherwise).
func (s *Emails) GetWithBounces(ctx context.Context, team, id uuid.UUID) (store.Email, map[string]store.Bounce, error) {
	e, err := s.store.GetEmail(ctx, team, id)
	if err != nil {
		return store.Email{}, nil, err
	}
	for _, r := range e.Recipients {
		if r.Status == store.EventBounced {
			bounces, err := s.store.Bounces(ctx, e.TeamID, e.ID)
			return e, bounces, err
		}
	}
	return e, nil, nil
}

// History returns what happened to e (one of the team's emails, as Get
// returned it): its events, and the message as built (nil when it has not
// been built yet).
func (s *Emails) History(ctx context.Context, e store.Email) ([]store.Event, []byte, error) {
	evs, err := s.store.Events(ctx, e.ID)
	if err != nil {
		return nil, nil, err
	}
	raw, err := s.store.Message(ctx, e.ID)
	if errors.Is(err, store.ErrNotFound) {
		return evs, nil, nil
	}
	return evs, raw, err
}

// Message returns e's message as built; store.ErrNotFound when it has not
// been built yet.
func (s *Emails) Message(ctx context.Context, e store.Email) ([]byte, error) {
	return s.store.Message(ctx, e.ID)
}

// ListSuppressions lists the team's suppression list, newest first.
func (s *Emails) ListSuppressions(ctx context.Context, team uuid.UUID, p store.Page) ([]store.Suppression, bool, error) {
	return s.store.ListSuppressions(ctx, team, p)
}

// SuppressionAddress checks an address to suppress and returns it
// normalised: a bare address, not of the sandbox.
func SuppressionAddress(raw *string) (string, error) {
	if raw == nil || strings.TrimSpace(*raw) == "" {
		return "", invalid.Missing("email")
	}
	a, err := address.ParseBare(*raw)
	if err != nil {
		return "", invalid.Errorf("email", "The `email` field must be an email address such as someone@example.com.")
	}
	if _, ok := sandbox.Outcome(a.Addr()); ok || sandbox.IsDomain(a.Domain) {
		return "", invalid.Errorf("email", "Sandbox addresses of %s cannot be suppressed.", sandbox.Domain)
	}
	return address.Normalize(a.Addr()), nil
}

// AddSuppression puts an address on the team's list by hand and records
// by (an audit entry with its actor and client filled in) as
// suppression.create in the same transaction. An address already listed
// keeps its entry, which is returned.
func (s *Emails) AddSuppression(ctx context.Context, team uuid.UUID, email *string, by audit.Entry) (store.Suppression, error) {
	addr, err := SuppressionAddress(email)
	if err != nil {
		return store.Suppression{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Suppression{}, err
	}
	by.Outcome = audit.Success
	sp, _, err := s.store.AddSuppressionBy(ctx, store.Suppression{ID: id, TeamID: team, Email: addr,
		Reason: store.SuppressionManual}, by)
	return sp, err
}

// errSuppressionRef is the error of a reference that is neither an id nor
// an address.
func errSuppressionRef() error {
	return Errorf(KindInvalidParameter, "id", "The path must end in a suppression id or an email address.")
}

// DeleteSuppression takes an entry, named by its id or its address, off
// the team's list and records by as suppression.delete in the same
// transaction; store.ErrNotFound when the team has no such entry.
func (s *Emails) DeleteSuppression(ctx context.Context, team uuid.UUID, ref string, by audit.Entry) (store.Suppression, error) {
	var id *uuid.UUID
	var addr string
	if u, err := uuid.Parse(ref); err == nil {
		id = &u
	} else if strings.Contains(ref, "@") {
		a, err := address.Parse(ref)
		if err != nil {
			return store.Suppression{}, errSuppressionRef()
		}
		addr = a.Addr()
	} else {
		return store.Suppression{}, errSuppressionRef()
	}
	by.Outcome = audit.Success
	return s.store.DeleteSuppression(ctx, team, id, addr, by)
}
