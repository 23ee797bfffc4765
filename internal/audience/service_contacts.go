package audience

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// TopicChoice is a contact's subscription to a topic as sent: the topic's
// id and opt_in or opt_out.
type TopicChoice struct {
	ID, Subscription string
}

// ContactInput is a contact to create, or the fields of an update; nil is
// absent.
type ContactInput struct {
	Email, FirstName, LastName *string
	Unsubscribed               *bool
	// Properties are custom property values (string or float64, as JSON
	// decodes them); on update a nil value removes one.
	Properties map[string]any
	// Segments (ids) and Topics are those of a new contact; update
	// ignores them.
	Segments []string
	Topics   []TopicChoice
}

// segmentIDs parses the ids of a contact's segments.
func segmentIDs(ids []string) ([]uuid.UUID, error) {
	out := make([]uuid.UUID, 0, len(ids))
	for _, s := range ids {
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, invalid.Errorf("segments", "The `segments` field must be a list of segment ids; %q is not one.", s)
		}
		out = append(out, id)
	}
	return out, nil
}

// topicChoices checks a contact's topic choices.
func topicChoices(in []TopicChoice) ([]store.TopicChoice, error) {
	out := make([]store.TopicChoice, 0, len(in))
	for _, t := range in {
		id, err := uuid.Parse(t.ID)
		if err != nil {
			return nil, invalid.Errorf("topics", "Each entry of `topics` must have the `id` of a topic; %q is not one.", t.ID)
		}
		if err := Subscription(t.ID, t.Subscription); err != nil {
			return nil, err
		}
		out = append(out, store.TopicChoice{TopicID: id, Subscription: t.Subscription})
	}
	return out, nil
}

// properties loads the team's definitions and checks values against them
// (CheckProperties); an empty map needs no lookup.
func (s *Service) properties(ctx context.Context, team uuid.UUID, in map[string]any) (map[string]any, []string, error) {
	if len(in) == 0 {
		return nil, nil, nil
	}
	defs, err := s.st.ContactPropertiesByKey(ctx, team)
	if err != nil {
		return nil, nil, err
	}
	return CheckProperties(defs, in)
}

// CreateContact adds a contact (email required) with its segments and
// topic choices, reported as contact.created. An address the team already
// has is an *AddressTakenError; a segment or topic it does not have a
// *store.RefError.
func (s *Service) CreateContact(ctx context.Context, team uuid.UUID, in ContactInput) (store.Contact, error) {
	if in.Email == nil || strings.TrimSpace(*in.Email) == "" {
		return store.Contact{}, invalid.Missing("email")
	}
	addr, err := ContactAddress(*in.Email)
	if err != nil {
		return store.Contact{}, err
	}
	if err := CheckNames(in.FirstName, in.LastName); err != nil {
		return store.Contact{}, err
	}
	segments, err := segmentIDs(in.Segments)
	if err != nil {
		return store.Contact{}, err
	}
	topics, err := topicChoices(in.Topics)
	if err != nil {
		return store.Contact{}, err
	}
	props, _, err := s.properties(ctx, team, in.Properties)
	if err != nil {
		return store.Contact{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Contact{}, err
	}
	ct := store.Contact{ID: id, TeamID: team, Email: addr, Properties: props}
	if in.FirstName != nil {
		ct.FirstName = *in.FirstName
	}
	if in.LastName != nil {
		ct.LastName = *in.LastName
	}
	if in.Unsubscribed != nil {
		ct.Unsubscribed = *in.Unsubscribed
	}
	ct, err = s.st.CreateContact(ctx, ct, segments, topics, EventContactCreated)
	return ct, addressTaken(err, addr)
}

// UpdateContact changes a contact's address, names, unsubscribed flag and
// property values, reported as contact.updated.
func (s *Service) UpdateContact(ctx context.Context, team uuid.UUID, ref store.ContactRef, in ContactInput) (store.Contact, error) {
	if err := s.refSegment(ctx, team, ref); err != nil {
		return store.Contact{}, err
	}
	if err := CheckNames(in.FirstName, in.LastName); err != nil {
		return store.Contact{}, err
	}
	u := store.ContactUpdate{FirstName: in.FirstName, LastName: in.LastName, Unsubscribed: in.Unsubscribed}
	var addr string
	if in.Email != nil {
		a, err := ContactAddress(*in.Email)
		if err != nil {
			return store.Contact{}, err
		}
		addr, u.Email = a, &a
	}
	var err error
	if u.SetProperties, u.RemoveProperties, err = s.properties(ctx, team, in.Properties); err != nil {
		return store.Contact{}, err
	}
	ct, err := s.st.UpdateContact(ctx, team, ref, u, EventContactUpdated)
	return ct, addressTaken(err, addr)
}

// Contact returns one of the team's contacts. Here and in UpdateContact and
// DeleteContact, a ref confined to a segment (ref.Segment) matches only a
// member of it (store.ErrNotFound otherwise), and a segment the team does
// not have is a *store.RefError.
func (s *Service) Contact(ctx context.Context, team uuid.UUID, ref store.ContactRef) (store.Contact, error) {
	if err := s.refSegment(ctx, team, ref); err != nil {
		return store.Contact{}, err
	}
	return s.st.Contact(ctx, team, ref)
}

// refSegment checks the segment a ContactRef is confined to (the audience
// of the legacy /audiences/{id}/contacts routes): a *store.RefError when
// the team has no such segment, so that a caller can tell a missing
// audience from a contact that is not in it (store.ErrNotFound).
func (s *Service) refSegment(ctx context.Context, team uuid.UUID, ref store.ContactRef) error {
	if ref.Segment == nil {
		return nil
	}
	if _, err := s.st.Segment(ctx, team, *ref.Segment); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &store.RefError{What: "segment", ID: *ref.Segment}
		}
		return err
	}
	return nil
}

// CreateContactIn creates a contact as a member of one of the team's
// segments: the legacy POST /audiences/{id}/contacts, where an audience is
// a segment. in.Segments and in.Topics are ignored. When the team already
// has a contact with the address, Resend's older model (one contact per
// audience) is kept as far as a team-wide contact allows: a contact not yet
// in the segment is added to it (reported as contact.updated, its fields
// unchanged) and returned with created false; one already in it is an
// *AddressTakenError. A segment the team does not have is a
// *store.RefError.
func (s *Service) CreateContactIn(ctx context.Context, team, segment uuid.UUID, in ContactInput) (ct store.Contact, created bool, err error) {
	if err := s.refSegment(ctx, team, store.ContactRef{Segment: &segment}); err != nil {
		return store.Contact{}, false, err
	}
	in.Segments, in.Topics = []string{segment.String()}, nil
	ct, err = s.CreateContact(ctx, team, in)
	var taken *AddressTakenError
	if !errors.As(err, &taken) {
		return ct, err == nil, err
	}
	existing, lerr := s.st.Contact(ctx, team, store.ContactRef{Email: taken.Email})
	if lerr != nil {
		return store.Contact{}, false, lerr
	}
	if slices.Contains(existing.SegmentIDs, segment) {
		return store.Contact{}, false, err
	}
	if err := s.st.AddContactToSegment(ctx, team, existing.ID, segment, EventContactUpdated); err != nil {
		return store.Contact{}, false, err
	}
	existing.SegmentIDs = append(existing.SegmentIDs, segment)
	return existing, false, nil
}

// ListContacts lists the team's contacts that f selects.
func (s *Service) ListContacts(ctx context.Context, team uuid.UUID, f store.ContactFilter, p store.Page) ([]store.Contact, bool, error) {
	return s.st.ListContacts(ctx, team, f, p)
}

// DeleteContact deletes a contact, reported as contact.deleted, and
// returns it.
func (s *Service) DeleteContact(ctx context.Context, team uuid.UUID, ref store.ContactRef) (store.Contact, error) {
	if err := s.refSegment(ctx, team, ref); err != nil {
		return store.Contact{}, err
	}
	return s.st.DeleteContact(ctx, team, ref, EventContactDeleted)
}

// ContactSegments lists the segments of one of the team's contacts.
func (s *Service) ContactSegments(ctx context.Context, team, contact uuid.UUID, p store.Page) ([]store.ContactSegment, bool, error) {
	return s.st.ContactSegments(ctx, team, contact, p)
}

// AddToSegment adds a contact to a segment; the change of its segments is
// reported as contact.updated.
func (s *Service) AddToSegment(ctx context.Context, team, contact, segment uuid.UUID) error {
	return s.st.AddContactToSegment(ctx, team, contact, segment, EventContactUpdated)
}

// RemoveFromSegment removes a contact from a segment (store.ErrNotFound
// when it is not in it), reported as contact.updated.
func (s *Service) RemoveFromSegment(ctx context.Context, team, contact, segment uuid.UUID) error {
	return s.st.RemoveContactFromSegment(ctx, team, contact, segment, EventContactUpdated)
}

// ContactTopics lists every topic of the team with the contact's
// subscription to it (its choice, else the topic's default).
func (s *Service) ContactTopics(ctx context.Context, team, contact uuid.UUID, p store.Page) ([]store.ContactTopic, bool, error) {
	return s.st.ContactTopics(ctx, team, contact, p)
}

// UpdateContactTopics records a contact's topic choices, reported as
// contact.topics_updated, and returns them.
func (s *Service) UpdateContactTopics(ctx context.Context, team, contact uuid.UUID, in []TopicChoice) ([]store.TopicChoice, error) {
	choices, err := topicChoices(in)
	if err != nil {
		return nil, err
	}
	if err := s.st.UpdateContactTopics(ctx, team, contact, choices, EventContactTopicsUpdated); err != nil {
		return nil, err
	}
	return choices, nil
}

// ContactPage is what the dashboard's page of a contact submits, as typed.
type ContactPage struct {
	Email, FirstName, LastName string
	Unsubscribed               bool
	// Properties is the text of each property's field by key; an empty
	// (or absent) field removes the value.
	Properties map[string]string
	// Topics is the subscription chosen for each topic, by topic id; an
	// empty or absent one leaves it as it is.
	Topics map[string]string
	// Segments are the segments ticked: the contact is added to those and
	// removed from the others.
	Segments []uuid.UUID
}

// ContactShown is a contact's page as submitted, to show again with the
// error of a rejected save: the contact with the typed values and its
// topics with the subscriptions chosen so far.
type ContactShown struct {
	Contact store.Contact
	Topics  []store.ContactTopic
}

// SaveContactPage saves the dashboard's page of contact ct: names,
// address, unsubscribed, property values, segment memberships and topic
// subscriptions. Everything is checked before anything is written; the
// fields and topic choices change last, in one transaction with the
// events that report the contact as saved (contact.updated, and
// contact.topics_updated when a choice changed).
func (s *Service) SaveContactPage(ctx context.Context, team uuid.UUID, ct store.Contact, in ContactPage) (ContactShown, error) {
	email := strings.TrimSpace(in.Email)
	first, last := strings.TrimSpace(in.FirstName), strings.TrimSpace(in.LastName)
	shown := ContactShown{Contact: ct}
	shown.Contact.Email, shown.Contact.FirstName, shown.Contact.LastName, shown.Contact.Unsubscribed = email, first, last, in.Unsubscribed
	shown.Contact.Properties = map[string]any{}
	topics, _, err := s.st.ContactTopics(ctx, team, ct.ID, store.Page{Limit: 100})
	if err != nil {
		return shown, err
	}
	shown.Topics = topics
	var choices []store.TopicChoice
	for i, t := range topics {
		v := in.Topics[t.ID.String()]
		if v == "" || v == t.Subscription {
			continue
		}
		if err := Subscription(t.ID.String(), v); err != nil {
			return shown, err
		}
		choices = append(choices, store.TopicChoice{TopicID: t.ID, Subscription: v})
		topics[i].Subscription = v
	}
	defs, err := s.st.ContactPropertiesByKey(ctx, team)
	if err != nil {
		return shown, err
	}
	values := map[string]any{}
	for key, def := range defs {
		raw := strings.TrimSpace(in.Properties[key])
		if raw == "" {
			if _, had := ct.Properties[key]; had {
				values[key] = nil
			}
			continue
		}
		shown.Contact.Properties[key] = raw
		values[key] = raw
		if def.Type == store.PropertyNumber {
			n, err := strconv.ParseFloat(raw, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
				return shown, invalid.Errorf("properties", "The contact property `%s` must be a number.", key)
			}
			values[key] = n
		}
	}
	set, remove, err := CheckProperties(defs, values)
	if err != nil {
		return shown, err
	}
	addr, err := ContactAddress(email)
	if err != nil {
		return shown, err
	}
	if err := CheckNames(&first, &last); err != nil {
		return shown, err
	}
	want := map[uuid.UUID]bool{}
	for _, id := range in.Segments {
		want[id] = true
	}
	// Memberships change without events of their own: the update below
	// reports the contact as saved.
	for id := range want {
		if !slices.Contains(ct.SegmentIDs, id) {
			if err := s.st.AddContactToSegment(ctx, team, ct.ID, id); err != nil {
				return shown, err
			}
		}
	}
	for _, id := range ct.SegmentIDs {
		if !want[id] {
			if err := s.st.RemoveContactFromSegment(ctx, team, ct.ID, id); err != nil && !errors.Is(err, store.ErrNotFound) {
				return shown, err
			}
		}
	}
	unsub := in.Unsubscribed
	u := store.ContactUpdate{Email: &addr, FirstName: &first, LastName: &last, Unsubscribed: &unsub,
		SetProperties: set, RemoveProperties: remove, Topics: choices}
	events := []string{EventContactUpdated}
	if len(choices) > 0 {
		events = append(events, EventContactTopicsUpdated)
	}
	_, err = s.st.UpdateContact(ctx, team, store.ContactRef{ID: &ct.ID}, u, events...)
	return shown, err
}
