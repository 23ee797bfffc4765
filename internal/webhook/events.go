package webhook

import (
	"context"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// Messages returns a page of the events of the team's endpoint webhookID,
// newest first.
func (e *Endpoints) Messages(ctx context.Context, teamID, webhookID uuid.UUID, p store.Page) ([]store.WebhookMessage, bool, error) {
	return e.store.Webhooks.ListWebhookMessages(ctx, teamID, webhookID, p)
}

// Message returns the event id of the team's endpoint webhookID.
func (e *Endpoints) Message(ctx context.Context, teamID, webhookID, id uuid.UUID) (store.WebhookMessage, error) {
	return e.store.Webhooks.GetWebhookMessage(ctx, teamID, webhookID, id)
}

// Attempts returns every delivery attempt of the team's event messageID,
// oldest first.
func (e *Endpoints) Attempts(ctx context.Context, teamID, messageID uuid.UUID) ([]store.WebhookAttempt, error) {
	return e.store.Webhooks.WebhookAttempts(ctx, teamID, messageID)
}

// Replay delivers the event messageID of w again, with the same id, and
// wakes w's delivery. A disabled endpoint is ErrDisabled.
func (e *Endpoints) Replay(ctx context.Context, w store.Webhook, messageID uuid.UUID) error {
	if w.Status != store.WebhookEnabled {
		return ErrDisabled
	}
	if err := e.store.Webhooks.ReplayWebhookMessage(ctx, w.TeamID, w.ID, messageID); err != nil {
		return err
	}
	e.wake(ctx, w.ID)
	return nil
}
