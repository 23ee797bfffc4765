package api

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

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
		message string // of the 422; empty when valid
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
			set, remove, err := checkProperties(defs, tc.in)
			if tc.message != "" {
				var ae *apiError
				require.True(t, errors.As(err, &ae), "%v", err)
				require.Equal(t, 422, ae.Status)
				require.Equal(t, nameValidation, ae.Name)
				require.Equal(t, tc.message, ae.Message)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.set, set)
			require.Equal(t, tc.remove, remove)
		})
	}
}

func TestFallbackValue(t *testing.T) {
	cases := []struct {
		typ, raw string
		want     any
		bad      bool
	}{
		{store.PropertyString, ``, nil, false},
		{store.PropertyString, `null`, nil, false},
		{store.PropertyString, `"Acme"`, "Acme", false},
		{store.PropertyString, `1`, nil, true},
		{store.PropertyNumber, `1.5`, 1.5, false},
		{store.PropertyNumber, `"1"`, nil, true},
		{store.PropertyNumber, `true`, nil, true},
	}
	for _, tc := range cases {
		got, err := fallbackValue(tc.typ, []byte(tc.raw))
		if tc.bad {
			require.Error(t, err, "%s %s", tc.typ, tc.raw)
			continue
		}
		require.NoError(t, err, "%s %s", tc.typ, tc.raw)
		require.Equal(t, tc.want, got)
	}
}
