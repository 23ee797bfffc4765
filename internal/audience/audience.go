// Package audience is the audience slice: the Service through which the
// HTTP API and the dashboard read and change a team's contacts, their
// custom property values, segments, topics and contact property
// definitions, and the checks it applies the one way both accept them.
// Its rejections are *invalid.Error naming the field; each edge
// translates them (the API into its 422 error body, the dashboard into a
// message above the form).
package audience

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// Webhook event types of contacts and topics (webhook.Types).
const (
	EventContactCreated       = "contact.created"
	EventContactUpdated       = "contact.updated"
	EventContactDeleted       = "contact.deleted"
	EventContactTopicsUpdated = store.EventContactTopicsUpdated
	EventTopicCreated         = "topic.created"
	EventTopicUpdated         = "topic.updated"
	EventTopicDeleted         = "topic.deleted"
)

// Limits Resend documents (topics) or Posthaste chose where it documents
// none (names of contacts and segments).
const (
	MaxNameLength          = 256 // a contact's first_name and last_name
	MaxSegmentName         = 256
	MaxTopicName           = 50  // characters
	MaxTopicDescription    = 200 // characters
	TopicVisibilityPublic  = "public"
	TopicVisibilityPrivate = "private"
)

// ContactAddress checks a contact's address (a bare address, no display
// name) and normalises it the way the suppression list does.
func ContactAddress(raw string) (string, error) {
	a, err := address.ParseBare(strings.TrimSpace(raw))
	if err != nil {
		return "", invalid.Errorf("email", "The `email` field must be an email address such as someone@example.com.")
	}
	return address.Normalize(a.Addr()), nil
}

// CheckNames validates first_name and last_name; nil is absent.
func CheckNames(first, last *string) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"first_name", first}, {"last_name", last}} {
		if f.v != nil && len(*f.v) > MaxNameLength {
			return invalid.Errorf(f.name, "The `%s` field must be at most %d characters.", f.name, MaxNameLength)
		}
	}
	return nil
}

// PropertyValue checks that v (decoded JSON: string or float64) is a value
// of a property of type typ; what names the value in the message.
func PropertyValue(typ string, v any, what string) error {
	switch typ {
	case store.PropertyString:
		if _, ok := v.(string); !ok {
			return invalid.Errorf("properties", "%s must be a string.", what)
		}
	case store.PropertyNumber:
		if _, ok := v.(float64); !ok {
			return invalid.Errorf("properties", "%s must be a number.", what)
		}
	}
	return nil
}

// CheckProperties validates a contact's property values against the
// team's definitions: every key must be defined and every value of the
// definition's type. A nil value removes the property. It returns the
// values to set and the keys to remove.
func CheckProperties(defs map[string]store.ContactProperty, in map[string]any) (map[string]any, []string, error) {
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad key is reported, the same one every time
	set := map[string]any{}
	var remove []string
	for _, k := range keys {
		def, ok := defs[k]
		if !ok {
			return nil, nil, invalid.Errorf("properties",
				"Unknown contact property `%s`: create it with POST /contact-properties first.", k)
		}
		v := in[k]
		if v == nil {
			remove = append(remove, k)
			continue
		}
		if err := PropertyValue(def.Type, v, "The contact property `"+k+"`"); err != nil {
			return nil, nil, err
		}
		set[k] = v
	}
	return set, remove, nil
}

// SegmentName checks the name of a segment's create (required) or rename
// and returns it trimmed.
func SegmentName(name *string) (string, error) {
	if name == nil || strings.TrimSpace(*name) == "" {
		return "", invalid.Missing("name")
	}
	if len(*name) > MaxSegmentName {
		return "", invalid.Errorf("name", "The `name` field must be at most %d characters.", MaxSegmentName)
	}
	return strings.TrimSpace(*name), nil
}

// CheckTopic validates the fields of a topic's create or update; nil is
// absent.
func CheckTopic(name, description, visibility *string) error {
	if name != nil && (strings.TrimSpace(*name) == "" || utf8.RuneCountInString(*name) > MaxTopicName) {
		return invalid.Errorf("name", "The `name` field must be 1 to %d characters.", MaxTopicName)
	}
	if description != nil && utf8.RuneCountInString(*description) > MaxTopicDescription {
		return invalid.Errorf("description", "The `description` field must be at most %d characters.", MaxTopicDescription)
	}
	if visibility != nil && *visibility != TopicVisibilityPublic && *visibility != TopicVisibilityPrivate {
		return invalid.Errorf("visibility", "The `visibility` field must be `public` or `private`.")
	}
	return nil
}

// DefaultSubscription checks a new topic's default_subscription (required).
func DefaultSubscription(v *string) error {
	switch {
	case v == nil:
		return invalid.Missing("default_subscription")
	case *v != store.TopicOptIn && *v != store.TopicOptOut:
		return invalid.Errorf("default_subscription", "The `default_subscription` field must be `opt_in` or `opt_out`.")
	}
	return nil
}

// Subscription checks a contact's subscription to a topic.
func Subscription(topic, v string) error {
	if v != store.TopicOptIn && v != store.TopicOptOut {
		return invalid.Errorf("topics", "The `subscription` of topic %s must be `opt_in` or `opt_out`.", topic)
	}
	return nil
}
