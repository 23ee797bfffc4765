package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/activities"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// ownerNotices tells a team's owners about a disabled webhook by email,
// sent through Posthaste itself from POSTHASTE_SYSTEM_FROM: as the team
// owning that sender's verified domain, or, for the sandbox sender, as the
// endpoint's own team (the sandbox writes to a team's members).
type ownerNotices struct {
	from   string // POSTHASTE_SYSTEM_FROM
	domain string // its domain, lower case
	store  *store.Store
	submit *submit.Service
	logger *slog.Logger
}

var _ activities.Noticer = (*ownerNotices)(nil)

// newOwnerNotices returns nil when from is empty: notices are then only logged.
func newOwnerNotices(from string, st *store.Store, sub *submit.Service, logger *slog.Logger) (*ownerNotices, error) {
	if from == "" {
		return nil, nil
	}
	a, err := submit.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("POSTHASTE_SYSTEM_FROM=%q is not an email address", from)
	}
	return &ownerNotices{from: from, domain: strings.ToLower(a.Domain), store: st, submit: sub,
		logger: logger.With("component", "notices")}, nil
}

func (n *ownerNotices) WebhookDisabled(ctx context.Context, wn activities.WebhookNotice) error {
	owners, err := n.store.TeamOwners(ctx, wn.TeamID)
	if err != nil || len(owners) == 0 {
		return err
	}
	team := wn.TeamID
	if !sandbox.IsDomain(n.domain) {
		if team, err = n.store.SendableDomainTeam(ctx, n.domain); err != nil {
			return fmt.Errorf("finding the verified domain of POSTHASTE_SYSTEM_FROM: %w", err)
		}
	}
	text := fmt.Sprintf("Posthaste disabled your webhook endpoint %s (id %s).\n\nReason: %s\n\n"+
		"Events are no longer sent to it. Fix the endpoint, enable it again with\n"+
		"PATCH /webhooks/%s {\"status\": \"enabled\"}, and replay the events you need.\n",
		wn.Endpoint, wn.WebhookID, wn.Reason, wn.WebhookID)
	subject := "Your webhook endpoint was disabled"
	req := submit.SendRequest{From: n.from, To: owners, Subject: &subject, Text: &text}
	id, err := n.submit.Send(ctx, submit.Sender{TeamID: team, KeyID: uuid.Nil}, req)
	if err != nil {
		return fmt.Errorf("sending the notice: %w", err)
	}
	n.logger.Info("webhook disabled notice sent", "team_id", wn.TeamID, "webhook_id", wn.WebhookID, "email_id", id)
	return nil
}
