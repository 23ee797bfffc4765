package audience

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

func TestCheckProperties(t *testing.T) {
	defs := map[string]store.ContactProperty{
		"plan":  {Key: "plan", Type: store.PropertyString},
		"seats": {Key: "seats", Type: store.PropertyNumber},
	}
	cases := []struct {
		name    string
		in      map[string]any
		set     map[string]any
		remove  []string
		message string // of the rejection; empty when valid
	}{
		{name: "none", in: nil, set: map[string]any{}},
		{name: "both types", in: map[string]any{"plan": "pro", "seats": 3.0},
			set: map[string]any{"plan": "pro", "seats": 3.0}},
		{name: "null removes", in: map[string]any{"plan": nil, "seats": 1.0},
			set: map[string]any{"seats": 1.0}, remove: []string{"plan"}},
		{name: "unknown key named", in: map[string]any{"plan": "x", "colour": "red"},
			message: "Unknown contact property `colour`: create it with POST /contact-properties first."},
		{name: "first unknown in key order", in: map[string]any{"zz": 1.0, "aa": 1.0},
			message: "Unknown contact property `aa`: create it with POST /contact-properties first."},
		{name: "string for number", in: map[string]any{"seats": "3"},
			message: "The contact property `seats` must be a number."},
		{name: "number for string", in: map[string]any{"plan": 3.0},
			message: "The contact property `plan` must be a string."},
		{name: "object for string", in: map[string]any{"plan": map[string]any{}},
			message: "The contact property `plan` must be a string."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, remove, err := CheckProperties(defs, tc.in)
			if tc.message != "" {
				var ie *invalid.Error
				require.True(t, errors.As(err, &ie), "%v", err)
				require.Equal(t, tc.message, ie.Message)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.set, set)
			require.Equal(t, tc.remove, remove)
		})
	}
}

func TestFieldChecks(t *testing.T) {
	long := string(make([]byte, MaxNameLength+1))
	blank, name := "  ", "  News  "
	bad, private := "secret", TopicVisibilityPrivate
	optIn, other := store.TopicOptIn, "maybe"
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"address with a display name", func() error { _, err := ContactAddress("Ann <ann@example.com>"); return err }(), "email"},
		{"not an address", func() error { _, err := ContactAddress("ann"); return err }(), "email"},
		{"long last name", CheckNames(nil, &long), "last_name"},
		{"blank segment name", func() error { _, err := SegmentName(&blank); return err }(), "name"},
		{"missing segment name", func() error { _, err := SegmentName(nil); return err }(), "name"},
		{"blank topic name", CheckTopic(&blank, nil, nil), "name"},
		{"bad visibility", CheckTopic(nil, nil, &bad), "visibility"},
		{"bad default", DefaultSubscription(&other), "default_subscription"},
		{"missing default", DefaultSubscription(nil), "default_subscription"},
		{"bad subscription", Subscription("t", other), "topics"},
	}
	for _, tc := range cases {
		var ie *invalid.Error
		require.True(t, errors.As(tc.err, &ie), "%s: %v", tc.name, tc.err)
		require.Equal(t, tc.field, ie.Field, tc.name)
	}
	addr, err := ContactAddress(" Ann@Example.COM ")
	require.NoError(t, err)
	require.Equal(t, store.NormalizeAddress("Ann@Example.COM"), addr)
	got, err := SegmentName(&name)
	require.NoError(t, err)
	require.Equal(t, "News", got)
	require.NoError(t, CheckTopic(&name, nil, &private))
	require.NoError(t, DefaultSubscription(&optIn))
}
