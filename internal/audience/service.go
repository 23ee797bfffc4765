package audience

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// Service is the one way the HTTP API and the dashboard read and change a
// team's audience: contacts (service_contacts.go), segments, topics and
// contact property definitions (this file). Each write checks its input
// (rejections are *invalid.Error), then makes the change in one store
// transaction together with the webhook events it reports. Lookups of
// another team's rows answer store.ErrNotFound. Contact imports have
// their own service (internal/imports).
type Service struct {
	st *store.Audience
}

// New returns the Service over the store's audience tables.
func New(st *store.Audience) *Service { return &Service{st: st} }

// ---- Segments

// CreateSegment adds a segment named name (required).
func (s *Service) CreateSegment(ctx context.Context, team uuid.UUID, name *string) (store.Segment, error) {
	n, err := SegmentName(name)
	if err != nil {
		return store.Segment{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Segment{}, err
	}
	return s.st.CreateSegment(ctx, store.Segment{ID: id, TeamID: team, Name: n})
}

// RenameSegment renames one of the team's segments.
func (s *Service) RenameSegment(ctx context.Context, team, id uuid.UUID, name *string) (store.Segment, error) {
	n, err := SegmentName(name)
	if err != nil {
		return store.Segment{}, err
	}
	return s.st.RenameSegment(ctx, team, id, n)
}

// Segment returns one of the team's segments.
func (s *Service) Segment(ctx context.Context, team, id uuid.UUID) (store.Segment, error) {
	return s.st.Segment(ctx, team, id)
}

// ListSegments lists the team's segments.
func (s *Service) ListSegments(ctx context.Context, team uuid.UUID, p store.Page) ([]store.Segment, bool, error) {
	return s.st.ListSegments(ctx, team, p)
}

// DeleteSegment deletes one of the team's segments and returns it.
func (s *Service) DeleteSegment(ctx context.Context, team, id uuid.UUID) (store.Segment, error) {
	return s.st.DeleteSegment(ctx, team, id)
}

// ---- Topics

// TopicInput is a topic to create, or the fields of an update; nil is
// absent.
type TopicInput struct {
	Name, Description, Visibility *string
	// DefaultSubscription is required on create; an update may only
	// repeat the topic's own.
	DefaultSubscription *string
	// FieldsFirst checks name, description and visibility before
	// default_subscription on create: the dashboard's order (its form
	// shows the first problem of the form top-down); the API checks a
	// missing name, then default_subscription, then the rest.
	FieldsFirst bool
}

// CreateTopic adds a topic; its visibility defaults to private.
func (s *Service) CreateTopic(ctx context.Context, team uuid.UUID, in TopicInput) (store.Topic, error) {
	if in.FieldsFirst {
		if err := CheckTopic(in.Name, in.Description, in.Visibility); err != nil {
			return store.Topic{}, err
		}
	}
	if in.Name == nil {
		return store.Topic{}, invalid.Missing("name")
	}
	if err := DefaultSubscription(in.DefaultSubscription); err != nil {
		return store.Topic{}, err
	}
	if err := CheckTopic(in.Name, in.Description, in.Visibility); err != nil {
		return store.Topic{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Topic{}, err
	}
	t := store.Topic{ID: id, TeamID: team, Name: strings.TrimSpace(*in.Name), DefaultSubscription: *in.DefaultSubscription,
		Visibility: TopicVisibilityPrivate}
	if in.Description != nil {
		t.Description = *in.Description
	}
	if in.Visibility != nil {
		t.Visibility = *in.Visibility
	}
	return s.st.CreateTopic(ctx, t, EventTopicCreated)
}

// UpdateTopic changes a topic's name, description and visibility; its
// default subscription is fixed at creation.
func (s *Service) UpdateTopic(ctx context.Context, team, id uuid.UUID, in TopicInput) (store.Topic, error) {
	if err := CheckTopic(in.Name, in.Description, in.Visibility); err != nil {
		return store.Topic{}, err
	}
	if in.DefaultSubscription != nil {
		cur, err := s.st.Topic(ctx, team, id)
		if err != nil {
			return store.Topic{}, err
		}
		if cur.DefaultSubscription != *in.DefaultSubscription {
			return store.Topic{}, invalid.Errorf("default_subscription",
				"The `default_subscription` of a topic cannot be changed after creation.")
		}
	}
	name := in.Name
	if name != nil {
		n := strings.TrimSpace(*name)
		name = &n
	}
	return s.st.UpdateTopic(ctx, team, id, store.TopicUpdate{Name: name, Description: in.Description,
		Visibility: in.Visibility}, EventTopicUpdated)
}

// Topic returns one of the team's topics.
func (s *Service) Topic(ctx context.Context, team, id uuid.UUID) (store.Topic, error) {
	return s.st.Topic(ctx, team, id)
}

// ListTopics lists the team's topics.
func (s *Service) ListTopics(ctx context.Context, team uuid.UUID, p store.Page) ([]store.Topic, bool, error) {
	return s.st.ListTopics(ctx, team, p)
}

// DeleteTopic deletes one of the team's topics and returns it.
func (s *Service) DeleteTopic(ctx context.Context, team, id uuid.UUID) (store.Topic, error) {
	return s.st.DeleteTopic(ctx, team, id, EventTopicDeleted)
}

// ---- Contact properties

// propertyKey is Resend's rule for property keys: at most 50 letters,
// digits and underscores.
var propertyKey = regexp.MustCompile(`^[A-Za-z0-9_]{1,50}$`)

// PropertyInput is a contact property to create, or the fields of an
// update; nil is absent.
type PropertyInput struct {
	Key, Type *string
	// FallbackValue is fallback_value as sent (JSON): empty when absent,
	// `null` to have none.
	FallbackValue json.RawMessage
}

// FallbackValue decodes a fallback_value for a property of type typ; null
// or absent is nil.
func FallbackValue(typ string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, invalid.Errorf("fallback_value", "The `fallback_value` field must be a string or a number.")
	}
	if v == nil {
		return nil, nil
	}
	if err := PropertyValue(typ, v, "The `fallback_value` field of a "+typ+" property"); err != nil {
		return nil, err
	}
	return v, nil
}

// CreateProperty defines a contact property. A key the team already uses
// is store.ErrConflict.
func (s *Service) CreateProperty(ctx context.Context, team uuid.UUID, in PropertyInput) (store.ContactProperty, error) {
	switch {
	case in.Key == nil:
		return store.ContactProperty{}, invalid.Missing("key")
	case in.Type == nil:
		return store.ContactProperty{}, invalid.Missing("type")
	case !propertyKey.MatchString(*in.Key):
		return store.ContactProperty{}, invalid.Errorf("key", "The `key` field must be 1 to 50 letters, digits or underscores.")
	case *in.Type != store.PropertyString && *in.Type != store.PropertyNumber:
		return store.ContactProperty{}, invalid.Errorf("type", "The `type` field must be `string` or `number`.")
	}
	fb, err := FallbackValue(*in.Type, in.FallbackValue)
	if err != nil {
		return store.ContactProperty{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.ContactProperty{}, err
	}
	return s.st.CreateContactProperty(ctx, store.ContactProperty{ID: id, TeamID: team, Key: *in.Key, Type: *in.Type, Fallback: fb})
}

// UpdateProperty changes a property's fallback value (absent: unchanged);
// its key and type are fixed at creation (changing them would invalidate
// stored values).
func (s *Service) UpdateProperty(ctx context.Context, team, id uuid.UUID, in PropertyInput) (store.ContactProperty, error) {
	p, err := s.st.ContactProperty(ctx, team, id)
	if err != nil {
		return store.ContactProperty{}, err
	}
	if in.Key != nil && *in.Key != p.Key || in.Type != nil && *in.Type != p.Type {
		return store.ContactProperty{}, invalid.Errorf("key", "The `key` and `type` of a contact property cannot be changed.")
	}
	fb, err := FallbackValue(p.Type, in.FallbackValue)
	if err != nil {
		return store.ContactProperty{}, err
	}
	if len(in.FallbackValue) == 0 {
		fb = p.Fallback // absent: unchanged
	}
	return s.st.SetContactPropertyFallback(ctx, team, id, fb)
}

// Property returns one of the team's contact properties.
func (s *Service) Property(ctx context.Context, team, id uuid.UUID) (store.ContactProperty, error) {
	return s.st.ContactProperty(ctx, team, id)
}

// ListProperties lists the team's contact properties.
func (s *Service) ListProperties(ctx context.Context, team uuid.UUID, p store.Page) ([]store.ContactProperty, bool, error) {
	return s.st.ListContactProperties(ctx, team, p)
}

// PropertiesByKey returns every contact property of the team by key.
func (s *Service) PropertiesByKey(ctx context.Context, team uuid.UUID) (map[string]store.ContactProperty, error) {
	return s.st.ContactPropertiesByKey(ctx, team)
}

// DeleteProperty deletes one of the team's contact properties and returns
// it.
func (s *Service) DeleteProperty(ctx context.Context, team, id uuid.UUID) (store.ContactProperty, error) {
	return s.st.DeleteContactProperty(ctx, team, id)
}

// AddressTakenError is the store.ErrConflict of a contact write: another
// contact of the team has Email (normalised).
type AddressTakenError struct{ Email string }

func (e *AddressTakenError) Error() string {
	return "a contact with email " + e.Email + " already exists"
}

// Unwrap makes an AddressTakenError a store.ErrConflict.
func (e *AddressTakenError) Unwrap() error { return store.ErrConflict }

// addressTaken turns the store's ErrConflict of a write of addr into an
// AddressTakenError.
func addressTaken(err error, addr string) error {
	if errors.Is(err, store.ErrConflict) {
		return &AddressTakenError{Email: addr}
	}
	return err
}
