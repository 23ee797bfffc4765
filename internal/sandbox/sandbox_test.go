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
		// Resend's test addresses are the same sandbox.
		{"delivered@resend.dev", []string{"delivered"}, true},
		{"delivered+x@resend.dev", []string{"delivered"}, true},
		{"Bounced+Signup@Resend.Dev", []string{"bounced"}, true},
		{"complained@resend.dev", []string{"delivered", "complained"}, true},
		{"suppressed+a+b@resend.dev", []string{"suppressed"}, true},
		{"onboarding@resend.dev", nil, false},
		{"someone@resend.dev", nil, false},
		{"delivered@mail.resend.dev", nil, false},
		{"delivered@resend.devx", nil, false},
		{"delivered@resend.com", nil, false},
	}
	for _, tt := range tests {
		got, ok := Outcome(tt.addr)
		require.Equal(t, tt.ok, ok, tt.addr)
		require.Equal(t, tt.want, got, tt.addr)
	}
}

func TestIsDomainAndSender(t *testing.T) {
	tests := []struct {
		domain, addr     string
		isDomain, sender bool
	}{
		{"posthaste.test", "onboarding@posthaste.test", true, true},
		{"PostHaste.Test", "Onboarding@PostHaste.Test", true, true},
		{"resend.dev", "onboarding@resend.dev", true, true},
		{"RESEND.DEV", "ONBOARDING@RESEND.DEV", true, true},
		{"resend.dev", "hello@resend.dev", true, false},
		{"resend.dev", "delivered@resend.dev", true, false},
		{"mail.resend.dev", "onboarding@mail.resend.dev", false, false},
		{"resend.com", "onboarding@resend.com", false, false},
		{"example.com", "onboarding@example.com", false, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.isDomain, IsDomain(tt.domain), tt.domain)
		require.Equal(t, tt.sender, IsSender(tt.addr), tt.addr)
	}
}
