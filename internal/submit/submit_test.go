package submit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// memberStore is a Store whose only team member is member@example.com and
// which has no domains; it records what it accepts.
type memberStore struct {
	Store    // the methods these tests never reach
	accepted []store.Email
}

func (m *memberStore) Accept(_ context.Context, a store.Acceptance) (int64, error) {
	m.accepted = append(m.accepted, a.Emails...)
	return 1, nil
}

func (m *memberStore) TeamMembers(_ context.Context, _ uuid.UUID, emails []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, e := range emails {
		if e == "member@example.com" {
			out[e] = true
		}
	}
	return out, nil
}

func (m *memberStore) DomainByName(context.Context, uuid.UUID, string) (store.Domain, error) {
	return store.Domain{}, store.ErrNotFound
}

func TestSystemSendsMayLeaveTheTeam(t *testing.T) {
	text := "hi"
	tests := []struct {
		name   string
		from   string
		to     string
		system bool
		err    string // the *Error field refused, "" for accepted
	}{
		{"sandbox to a member", "onboarding@posthaste.test", "member@example.com", false, ""},
		{"sandbox to a stranger", "onboarding@posthaste.test", "invitee@example.com", false, "to"},
		{"system sandbox to a stranger", "Posthaste <onboarding@posthaste.test>", "invitee@example.com", true, ""},
		{"system from another sandbox address", "noreply@posthaste.test", "invitee@example.com", true, "from"},
		{"system from an unverified domain", "noreply@example.com", "invitee@example.com", true, "from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &memberStore{}
			s := New(Config{Store: st, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
			req := SendRequest{From: tt.from, To: []string{tt.to}, Subject: &text, Text: &text}
			_, err := s.SendWithOptions(context.Background(), Sender{TeamID: uuid.New()}, req, SendOptions{System: tt.system})
			if tt.err == "" {
				require.NoError(t, err)
				require.Len(t, st.accepted, 1)
				return
			}
			var se *Error
			require.True(t, errors.As(err, &se), "%v", err)
			require.Equal(t, KindForbidden, se.Kind)
			require.Equal(t, tt.err, se.Field)
			require.Empty(t, st.accepted)
		})
	}
}

// Resend's test sender and addresses (resend.dev) are the sandbox, exactly as
// posthaste.test's: its sender writes without a verified domain to the sandbox
// addresses and the team's members, nobody else, and is its domain's only
// sender.
func TestResendTestAddressesAreTheSandbox(t *testing.T) {
	text := "hi"
	domainKey := uuid.New()
	tests := []struct {
		name    string
		from    string
		to      []string
		key     *uuid.UUID // the key's domain restriction
		err     string     // the *Error field refused, "" for accepted
		message string
	}{
		{"to delivered", "Acme <onboarding@resend.dev>", []string{"delivered@resend.dev"}, nil, "", ""},
		{"to every outcome with labels", "onboarding@resend.dev", []string{"delivered+a@resend.dev",
			"bounced+b@resend.dev", "complained@resend.dev", "suppressed+c@resend.dev"}, nil, "", ""},
		{"any case", "ONBOARDING@Resend.Dev", []string{"Delivered@RESEND.dev"}, nil, "", ""},
		{"to a member", "onboarding@resend.dev", []string{"member@example.com"}, nil, "", ""},
		{"the domains mixed", "onboarding@posthaste.test", []string{"bounced@resend.dev"}, nil, "", ""},
		{"to a stranger", "onboarding@resend.dev", []string{"delivered@resend.dev", "someone@example.com"}, nil, "to",
			"You can only send testing emails from onboarding@resend.dev to your own team's addresses or to the sandbox addresses delivered@, bounced@, complained@ and suppressed@resend.dev."},
		{"to another resend.dev address", "onboarding@resend.dev", []string{"hello@resend.dev"}, nil, "to", ""},
		{"from another resend.dev address", "hello@resend.dev", []string{"delivered@resend.dev"}, nil, "from",
			"The sandbox domain resend.dev can only send from onboarding@resend.dev."},
		{"with a key of a domain", "onboarding@resend.dev", []string{"delivered@resend.dev"}, &domainKey, "from",
			"This API key can only send from its own domain, not from the sandbox domain resend.dev."},
		{"from resend.com", "onboarding@resend.com", []string{"delivered@resend.dev"}, nil, "from",
			"The resend.com domain is not verified."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &memberStore{}
			s := New(Config{Store: st, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
			req := SendRequest{From: tt.from, To: tt.to, Subject: &text, Text: &text}
			_, err := s.SendWithOptions(context.Background(), Sender{TeamID: uuid.New(), DomainID: tt.key}, req, SendOptions{})
			if tt.err == "" {
				require.NoError(t, err)
				require.Len(t, st.accepted, 1)
				require.Nil(t, st.accepted[0].DomainID)
				return
			}
			var se *Error
			require.True(t, errors.As(err, &se), "%v", err)
			require.Equal(t, KindForbidden, se.Kind)
			require.Equal(t, tt.err, se.Field)
			require.Contains(t, se.Message, tt.message)
			require.Empty(t, st.accepted)
		})
	}
}
