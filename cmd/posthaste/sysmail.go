package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/webhook"
)

// systemMailer sends Posthaste's own emails through Posthaste itself, from
// POSTHASTE_SYSTEM_FROM, as system email (submit.SendOptions.System): as
// the team owning that sender's verified domain or, for the sandbox sender,
// which no team owns, as the team the email concerns. Notices to owners
// (a disabled webhook) concern the owners' team; invitations and
// password-reset links carry secrets, so they go as the member-less system
// team, whose email log nobody reads.
type systemMailer struct {
	from   string // POSTHASTE_SYSTEM_FROM
	domain string // its domain, lower case
	store  *store.Store
	submit *submit.Service
	logger *slog.Logger
}

var (
	_ webhook.Noticer  = (*systemMailer)(nil)
	_ dashboard.Mailer = (*systemMailer)(nil)
)

// newSystemMailer returns nil when from is empty: no system email is sent.
func newSystemMailer(from string, st *store.Store, sub *submit.Service, logger *slog.Logger) (*systemMailer, error) {
	if from == "" {
		return nil, nil
	}
	a, err := address.Parse(from)
	if err != nil {
		return nil, fmt.Errorf("POSTHASTE_SYSTEM_FROM=%q is not an email address", from)
	}
	return &systemMailer{from: from, domain: strings.ToLower(a.Domain), store: st, submit: sub,
		logger: logger.With("component", "sysmail")}, nil
}

// send accepts one plain-text email; sandboxTeam is the team it is sent as
// when the sender is the sandbox's.
func (m *systemMailer) send(ctx context.Context, sandboxTeam uuid.UUID, to []string, subject, text string) (uuid.UUID, error) {
	res, err := m.sendKeyed(ctx, sandboxTeam, to, subject, text, nil)
	return res.ID, err
}

// sendKeyed is send with an idempotency key (nil: none): sending the same
// email again with the key within 24 hours returns the first result,
// Replayed, instead of accepting a second email.
func (m *systemMailer) sendKeyed(ctx context.Context, sandboxTeam uuid.UUID, to []string, subject, text string,
	key *string) (submit.SendResult, error) {
	team := sandboxTeam
	if !sandbox.IsDomain(m.domain) {
		var err error
		if team, err = m.store.Webhooks.SendableDomainTeam(ctx, m.domain); err != nil {
			return submit.SendResult{}, fmt.Errorf("finding the verified domain of POSTHASTE_SYSTEM_FROM: %w", err)
		}
	}
	req := submit.SendRequest{From: m.from, To: to, Subject: &subject, Text: &text}
	res, err := m.submit.SendWithOptions(ctx, submit.Sender{TeamID: team, KeyID: uuid.Nil}, req,
		submit.SendOptions{System: true, IdempotencyKey: key})
	if err != nil {
		return submit.SendResult{}, fmt.Errorf("sending %q: %w", subject, err)
	}
	return res, nil
}

// SendMail implements dashboard.Mailer.
func (m *systemMailer) SendMail(ctx context.Context, mail dashboard.Mail) error {
	id, err := m.send(ctx, store.SystemTeamID, []string{mail.To}, mail.Subject, mail.Text)
	if err != nil {
		return err
	}
	m.logger.Debug("system email accepted", "email_id", id)
	return nil
}

// WebhookDisabled implements webhook.Noticer: it tells the team's owners.
func (m *systemMailer) WebhookDisabled(ctx context.Context, wn webhook.Notice) error {
	owners, err := m.store.Webhooks.TeamOwners(ctx, wn.TeamID)
	if err != nil || len(owners) == 0 {
		return err
	}
	text := fmt.Sprintf("Posthaste disabled your webhook endpoint %s (id %s).\n\nReason: %s\n\n"+
		"Events are no longer sent to it. Fix the endpoint, enable it again with\n"+
		"PATCH /webhooks/%s {\"status\": \"enabled\"}, and replay the events you need.\n",
		wn.Endpoint, wn.WebhookID, wn.Reason, wn.WebhookID)
	id, err := m.send(ctx, wn.TeamID, owners, "Your webhook endpoint was disabled", text)
	if err != nil {
		return err
	}
	m.logger.Info("webhook disabled notice sent", "team_id", wn.TeamID, "webhook_id", wn.WebhookID, "email_id", id)
	return nil
}
