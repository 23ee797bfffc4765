package dashboard

import (
	"context"
	"net/http"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/webhook"
)

// WebhookWaker makes an endpoint's delivery look for due messages.
type WebhookWaker interface {
	Wake(ctx context.Context, webhookID string) error
}

type webhookView struct {
	Webhook  store.Webhook
	Messages []messageView
}

type messageView struct {
	store.WebhookMessage
	PublicID string
}

type webhooksData struct {
	Webhooks []webhookView
	Disabled []store.Webhook // endpoints turned off, with the reason
}

// webhooks lists the endpoints with their latest events; a disabled
// endpoint is announced at the top with the reason.
func (h *Handler) webhooks(w http.ResponseWriter, r *http.Request, se *store.Session) {
	list, _, err := h.store.ListWebhooks(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var d webhooksData
	for _, wh := range list {
		msgs, _, err := h.store.ListWebhookMessages(r.Context(), se.TeamID, wh.ID, store.Page{Limit: 20})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v := webhookView{Webhook: wh}
		for _, m := range msgs {
			v.Messages = append(v.Messages, messageView{WebhookMessage: m, PublicID: webhook.MessageID(m.ID)})
		}
		d.Webhooks = append(d.Webhooks, v)
		if wh.Status != store.WebhookEnabled {
			d.Disabled = append(d.Disabled, wh)
		}
	}
	h.render(w, http.StatusOK, "webhooks", view{Title: "Webhooks", Nav: "webhooks", Session: se, CSRF: se.CSRFToken, Data: d})
}

type webhookEventData struct {
	Webhook  store.Webhook
	Message  messageView
	Attempts []store.WebhookAttempt
	Payload  string
}

// teamMessage loads an endpoint of the session's team and one of its messages.
func (h *Handler) teamMessage(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Webhook, store.WebhookMessage, bool) {
	hid, err1 := uuid.Parse(r.PathValue("id"))
	mid, err2 := uuid.Parse(r.PathValue("msg"))
	if err1 != nil || err2 != nil {
		http.NotFound(w, r)
		return store.Webhook{}, store.WebhookMessage{}, false
	}
	wh, err := h.store.GetWebhook(r.Context(), se.TeamID, hid)
	if err == nil {
		var m store.WebhookMessage
		m, err = h.store.GetWebhookMessage(r.Context(), se.TeamID, hid, mid)
		if err == nil {
			return wh, m, true
		}
	}
	h.failOr404(w, r, err)
	return store.Webhook{}, store.WebhookMessage{}, false
}

// webhookEvent shows one event: its payload and every attempt.
func (h *Handler) webhookEvent(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, m, ok := h.teamMessage(w, r, se)
	if !ok {
		return
	}
	attempts, err := h.store.WebhookAttempts(r.Context(), se.TeamID, m.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "webhook_event", view{Title: "Webhook event", Nav: "webhooks", Session: se,
		CSRF: se.CSRFToken, Data: webhookEventData{Webhook: wh, Attempts: attempts, Payload: string(m.Payload),
			Message: messageView{WebhookMessage: m, PublicID: webhook.MessageID(m.ID)}}})
}

// replayWebhookEvent delivers an event again, with the same id.
func (h *Handler) replayWebhookEvent(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, m, ok := h.teamMessage(w, r, se)
	if !ok {
		return
	}
	if wh.Status != store.WebhookEnabled {
		http.Error(w, "The endpoint is disabled; enable it before replaying events.", http.StatusUnprocessableEntity)
		return
	}
	if err := h.store.ReplayWebhookMessage(r.Context(), se.TeamID, wh.ID, m.ID); err != nil {
		h.fail(w, r, err)
		return
	}
	if h.cfg.WebhookWaker != nil {
		if err := h.cfg.WebhookWaker.Wake(r.Context(), wh.ID.String()); err != nil {
			h.logger.Warn("waking webhook delivery", "webhook_id", wh.ID, "err", err)
		}
	}
	http.Redirect(w, r, "/dashboard/webhooks/"+wh.ID.String()+"/events/"+m.ID.String(), http.StatusSeeOther)
}
