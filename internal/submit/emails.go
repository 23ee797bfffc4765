package submit

import (
	"context"
	"errors"
	"slices"
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

// SuppressionOrigins are the origins (reasons) of entries, Resend's names.
var SuppressionOrigins = []string{store.SuppressionBounce, store.SuppressionComplaint, store.SuppressionManual}

// ListSuppressions lists the team's suppression list, newest first; only
// the entries of origin when it is not "" (one of SuppressionOrigins).
func (s *Emails) ListSuppressions(ctx context.Context, team uuid.UUID, origin string, p store.Page) ([]store.Suppression, bool, error) {
	if origin != "" && !slices.Contains(SuppressionOrigins, origin) {
		return nil, false, invalid.Errorf("origin", "The `origin` parameter must be one of %s.",
			strings.Join(SuppressionOrigins, ", "))
	}
	return s.store.ListSuppressions(ctx, team, origin, p)
}

// GetSuppression returns the team's entry named by ref, its id or its
// address; store.ErrNotFound when the team has none.
func (s *Emails) GetSuppression(ctx context.Context, team uuid.UUID, ref string) (store.Suppression, error) {
	id, addr, err := suppressionRef(ref)
	if err != nil {
		return store.Suppression{}, err
	}
	return s.store.GetSuppression(ctx, team, id, addr)
}

// MaxSuppressionBatch is how many addresses or ids one batch of
// suppressions may name (Resend's limit).
const MaxSuppressionBatch = 100

// batchSize checks the length of a batch's list named field.
func batchSize(field string, n int) error {
	if n < 1 || n > MaxSuppressionBatch {
		return invalid.Errorf(field, "The `%s` field must hold between 1 and %d items.", field, MaxSuppressionBatch)
	}
	return nil
}

// AddSuppressions puts the addresses (1 to MaxSuppressionBatch; nil when
// the field is absent) on the team's list by hand in one transaction,
// all or none, and records by once per entry as suppression.create. An
// address already listed keeps its entry, which is returned in its place.
func (s *Emails) AddSuppressions(ctx context.Context, team uuid.UUID, emails []string, by audit.Entry) ([]store.AddedSuppression, error) {
	if emails == nil {
		return nil, invalid.Missing("emails")
	}
	if err := batchSize("emails", len(emails)); err != nil {
		return nil, err
	}
	sps := make([]store.Suppression, len(emails))
	for i, raw := range emails {
		a, err := address.ParseBare(raw)
		if err != nil {
			return nil, invalid.Errorf("emails", "`emails[%d]` must be an email address such as someone@example.com.", i)
		}
		if _, ok := sandbox.Outcome(a.Addr()); ok || sandbox.IsDomain(a.Domain) {
			return nil, invalid.Errorf("emails", "`emails[%d]`: sandbox addresses of %s cannot be suppressed.", i, sandbox.Domain)
		}
		addr := address.Normalize(a.Addr())
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		sps[i] = store.Suppression{ID: id, TeamID: team, Email: addr, Reason: store.SuppressionManual}
	}
	by.Outcome = audit.Success
	return s.store.AddSuppressionsBy(ctx, sps, by)
}

// SuppressionRemoval is the outcome of one item of RemoveSuppressions:
// the entry named (ID nil when an address had none), and whether it was
// removed.
type SuppressionRemoval struct {
	ID      *uuid.UUID
	Email   string // the entry's address, or the address asked for
	Deleted bool
}

// RemoveSuppressions takes entries off the team's list in one
// transaction, named by exactly one of emails or ids (1 to
// MaxSuppressionBatch; nil when the field is absent), and records by
// once per entry removed as suppression.delete. It answers one
// SuppressionRemoval per item asked for, in order; an item the team has
// no entry for is not an error (Deleted false).
func (s *Emails) RemoveSuppressions(ctx context.Context, team uuid.UUID, emails, ids []string, by audit.Entry) ([]SuppressionRemoval, error) {
	switch {
	case emails == nil && ids == nil:
		return nil, &invalid.Error{Field: "emails", Missing: true, Message: "Missing `emails` or `ids` field."}
	case emails != nil && ids != nil:
		return nil, invalid.Errorf("ids", "Provide either `emails` or `ids`, not both.")
	}
	field, n := "emails", len(emails)
	if ids != nil {
		field, n = "ids", len(ids)
	}
	if err := batchSize(field, n); err != nil {
		return nil, err
	}
	uids := make([]uuid.UUID, len(ids))
	for i, raw := range ids {
		u, err := uuid.Parse(raw)
		if err != nil {
			return nil, Errorf(KindInvalidParameter, "ids", "`ids[%d]` must be a suppression id.", i)
		}
		uids[i] = u
	}
	addrs := make([]string, len(emails))
	for i, raw := range emails {
		a, err := address.ParseBare(raw)
		if err != nil {
			return nil, invalid.Errorf("emails", "`emails[%d]` must be an email address such as someone@example.com.", i)
		}
		addrs[i] = store.NormalizeAddress(a.Addr())
	}
	by.Outcome = audit.Success
	gone, err := s.store.DeleteSuppressionsBy(ctx, team, uids, addrs, by)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]store.Suppression, len(gone))
	byAddr := make(map[string]store.Suppression, len(gone))
	for _, sp := range gone {
		byID[sp.ID], byAddr[sp.Email] = sp, sp
	}
	out := make([]SuppressionRemoval, 0, n)
	for _, u := range uids {
		r := SuppressionRemoval{ID: &u}
		if sp, ok := byID[u]; ok {
			r.Email, r.Deleted = sp.Email, true
		}
		out = append(out, r)
	}
	for _, a := range addrs {
		r := SuppressionRemoval{Email: a}
		if sp, ok := byAddr[a]; ok {
			r.ID, r.Deleted = &sp.ID, true
		}
		out = append(out, r)
	}
	return out, nil
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

// suppressionRef reads a path's reference to an entry: its id, or its
// address.
func suppressionRef(ref string) (*uuid.UUID, string, error) {
	if u, err := uuid.Parse(ref); err == nil {
		return &u, "", nil
	}
	if !strings.Contains(ref, "@") {
		return nil, "", errSuppressionRef()
	}
	a, err := address.Parse(ref)
	if err != nil {
		return nil, "", errSuppressionRef()
	}
	return nil, a.Addr(), nil
}

// DeleteSuppression takes an entry, named by its id or its address, off
// the team's list and records by as suppression.delete in the same
// transaction; store.ErrNotFound when the team has no such entry.
func (s *Emails) DeleteSuppression(ctx context.Context, team uuid.UUID, ref string, by audit.Entry) (store.Suppression, error) {
	id, addr, err := suppressionRef(ref)
	if err != nil {
		return store.Suppression{}, err
	}
	by.Outcome = audit.Success
	return s.store.DeleteSuppression(ctx, team, id, addr, by)
}
