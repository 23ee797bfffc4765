package sandbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOutcome(t *testing.T) {
	tests := []struct {
		addr string
		want []string
		ok   bool
	}{
		{"delivered@posthaste.test", []string{"delivered"}, true},
		{"Delivered+signup@PostHaste.Test", []string{"delivered"}, true},
		{"bounced@posthaste.test", []string{"bounced"}, true},
		{"complained+x@posthaste.test", []string{"delivered", "complained"}, true},
		{"suppressed@posthaste.test", []string{"suppressed"}, true},
		{"onboarding@posthaste.test", nil, false},
		{"delivered@example.com", nil, false},
		{"delivered", nil, false},
	}
	for _, tt := range tests {
		got, ok := Outcome(tt.addr)
		require.Equal(t, tt.ok, ok, tt.addr)
		require.Equal(t, tt.want, got, tt.addr)
	}
}
