package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/webhook"
)

// webhooksHandler serves the pages of webhook endpoints and their events.
type webhooksHandler struct{ *Handler }

// routes adds the pages of webhook endpoints and their events.
func (h *webhooksHandler) routes(m *http.ServeMux) {
	m.Handle("GET /dashboard/webhooks", h.signedIn(h.webhooks))
	m.Handle("POST /dashboard/webhooks", h.signedIn(h.addWebhook))
	m.Handle("GET /dashboard/webhooks/{id}", h.signedIn(h.webhook))
	m.Handle("POST /dashboard/webhooks/{id}", h.signedIn(h.editWebhook))
	m.Handle("POST /dashboard/webhooks/{id}/status", h.signedIn(h.webhookStatus))
	m.Handle("POST /dashboard/webhooks/{id}/secret", h.signedIn(h.revealWebhookSecret))
	m.Handle("POST /dashboard/webhooks/{id}/rotate", h.signedIn(h.rotateWebhookSecret))
	m.Handle("POST /dashboard/webhooks/{id}/test", h.signedIn(h.testWebhook))
	m.Handle("GET /dashboard/webhooks/{id}/delete", h.signedIn(h.deleteWebhookPage))
	m.Handle("POST /dashboard/webhooks/{id}/delete", h.signedIn(h.deleteWebhook))
	m.Handle("GET /dashboard/webhooks/{id}/events/{msg}", h.signedIn(h.webhookEvent))
	m.Handle("POST /dashboard/webhooks/{id}/events/{msg}/replay", h.signedIn(h.replayWebhookEvent))
}

type messageView struct {
	store.WebhookMessage
	PublicID string
}

// eventGroup is a family of event types (email.*, domain.*, contact.*),
// one group of checkboxes in the endpoint forms.
type eventGroup struct {
	Name  string
	Types []string
}

// eventGroups groups webhook.Types by the part before the dot, in order.
func eventGroups() []eventGroup {
	var gs []eventGroup
	for _, t := range webhook.Types {
		name, _, _ := strings.Cut(t, ".")
		if len(gs) == 0 || gs[len(gs)-1].Name != name {
			gs = append(gs, eventGroup{Name: name})
		}
		gs[len(gs)-1].Types = append(gs[len(gs)-1].Types, t)
	}
	return gs
}

// webhookForm is what an endpoint form holds, kept when it is shown again
// with an error.
type webhookForm struct {
	Endpoint string
	Events   []string
}

// webhookFormValues reads an endpoint form.
func webhookFormValues(r *http.Request) webhookForm {
	_ = r.ParseForm() // the CSRF check parsed it already
	return webhookForm{Endpoint: strings.TrimSpace(r.PostForm.Get("endpoint")), Events: r.PostForm["events"]}
}

type webhooksData struct {
	Webhooks    []store.Webhook
	Disabled    []store.Webhook // endpoints turned off, with the reason
	EventGroups []eventGroup
	Form        webhookForm
	Error       formError
	AllowHTTP   bool
}

// webhooks lists the endpoints with a form to add one; a disabled
// endpoint is announced at the top with the reason.
func (h *webhooksHandler) webhooks(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderWebhooks(w, r, se, http.StatusOK, webhooksData{})
}

func (h *webhooksHandler) renderWebhooks(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d webhooksData) {
	list, _, err := h.endpoints.List(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Webhooks, d.EventGroups, d.AllowHTTP = list, eventGroups(), h.endpoints.AllowHTTP()
	for _, wh := range list {
		if wh.Status != store.WebhookEnabled {
			d.Disabled = append(d.Disabled, wh)
		}
	}
	h.render(w, status, "webhooks", view{Title: "Webhooks", Nav: "webhooks", Session: se, CSRF: se.CSRFToken, Data: d})
}

// addWebhook adds an endpoint and opens its page.
func (h *webhooksHandler) addWebhook(w http.ResponseWriter, r *http.Request, se *store.Session) {
	f := webhookFormValues(r)
	wh, _, err := h.endpoints.Create(r.Context(), se.TeamID, f.Endpoint, f.Events, by(r, se))
	if fe, ok := asFormError(err); ok {
		h.renderWebhooks(w, r, se, http.StatusUnprocessableEntity, webhooksData{Form: f, Error: fe})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.Info("webhook created", "team_id", se.TeamID, "webhook_id", wh.ID)
	http.Redirect(w, r, "/dashboard/webhooks/"+wh.ID.String()+"?done=added", http.StatusSeeOther)
}

type webhookData struct {
	Webhook     store.Webhook
	Messages    []messageView
	EventGroups []eventGroup
	TestTypes   []string
	Form        webhookForm
	Secret      string // shown after reveal or rotation
	Notice      string
	Error       formError
	AllowHTTP   bool
	CanTest     bool
}

// webhookNotices are the messages a redirect back to an endpoint's page may ask for.
var webhookNotices = map[string]string{
	"added":    "Endpoint added. Reveal its signing secret below to verify the requests it receives, and send it a test event.",
	"saved":    "Endpoint saved.",
	"enabled":  "Endpoint enabled: events are delivered to it again.",
	"disabled": "Endpoint disabled: no events are delivered to it until you enable it.",
}

// loadWebhook loads the {id} endpoint of the session's team.
func (h *webhooksHandler) loadWebhook(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Webhook, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Webhook, error) {
		return h.endpoints.Get(r.Context(), se.TeamID, id)
	})
}

// webhook shows an endpoint: its settings, its latest events with their
// delivery status, and the forms that change, test and delete it.
func (h *webhooksHandler) webhook(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	h.renderWebhook(w, r, se, http.StatusOK, webhookData{Webhook: wh, Notice: webhookNotices[r.URL.Query().Get("done")]})
}

func (h *webhooksHandler) renderWebhook(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d webhookData) {
	msgs, _, err := h.endpoints.Messages(r.Context(), se.TeamID, d.Webhook.ID, store.Page{Limit: 20})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, m := range msgs {
		d.Messages = append(d.Messages, messageView{WebhookMessage: m, PublicID: webhook.MessageID(m.ID)})
	}
	if d.Form.Endpoint == "" && d.Form.Events == nil {
		d.Form = webhookForm{Endpoint: d.Webhook.Endpoint, Events: d.Webhook.Events}
	}
	d.EventGroups, d.TestTypes, d.AllowHTTP = eventGroups(), webhook.Types, h.endpoints.AllowHTTP()
	d.CanTest = h.endpoints.CanTest()
	h.render(w, status, "webhook", view{Title: "Webhook " + d.Webhook.Endpoint, Nav: "webhooks", Session: se,
		CSRF: se.CSRFToken, Data: d})
}

// editWebhook changes an endpoint's URL and event types.
func (h *webhooksHandler) editWebhook(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	f := webhookFormValues(r)
	events := f.Events
	err := h.endpoints.Update(r.Context(), se.TeamID, wh.ID, webhook.Change{Endpoint: &f.Endpoint, Events: &events},
		by(r, se))
	if fe, ok := asFormError(err); ok {
		if f.Events == nil {
			f.Events = []string{} // keep the boxes unchecked as they were sent
		}
		h.renderWebhook(w, r, se, http.StatusUnprocessableEntity, webhookData{Webhook: wh, Form: f, Error: fe})
		return
	}
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/webhooks/"+wh.ID.String()+"?done=saved", http.StatusSeeOther)
}

// webhookStatus enables or disables an endpoint.
func (h *webhooksHandler) webhookStatus(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	status := r.PostFormValue("status")
	err := h.endpoints.SetStatus(r.Context(), se.TeamID, wh.ID, status, by(r, se))
	if fe, ok := asFormError(err); ok {
		h.renderWebhook(w, r, se, http.StatusUnprocessableEntity, webhookData{Webhook: wh, Error: fe})
		return
	}
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/webhooks/"+wh.ID.String()+"?done="+status, http.StatusSeeOther)
}

// revealWebhookSecret shows the endpoint's signing secret. It is a POST,
// so the secret is in no URL, history or cache.
func (h *webhooksHandler) revealWebhookSecret(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	secret, err := h.endpoints.Secret(wh)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderWebhook(w, r, se, http.StatusOK, webhookData{Webhook: wh, Secret: secret})
}

// rotateWebhookSecret gives the endpoint a new secret and shows it.
func (h *webhooksHandler) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	secret, err := h.endpoints.Rotate(r.Context(), wh, by(r, se))
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	h.logger.Info("webhook secret rotated", "team_id", se.TeamID, "webhook_id", wh.ID)
	h.renderWebhook(w, r, se, http.StatusOK, webhookData{Webhook: wh, Secret: secret,
		Notice: "New signing secret made. The previous one keeps signing alongside it for 24 hours, so update your receiver within that time."})
}

// testWebhook sends the endpoint a sample event now and opens the event,
// which shows the attempt and the endpoint's answer.
func (h *webhooksHandler) testWebhook(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	typ := r.PostFormValue("type")
	if !slices.Contains(webhook.Types, typ) {
		typ = ""
	}
	row, err := h.endpoints.Test(r.Context(), wh, typ)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/webhooks/"+wh.ID.String()+"/events/"+row.MessageID.String(), http.StatusSeeOther)
}

// deleteWebhookPage asks to confirm a deletion.
func (h *webhooksHandler) deleteWebhookPage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	h.render(w, http.StatusOK, "webhook_delete", view{Title: "Delete webhook", Nav: "webhooks", Session: se,
		CSRF: se.CSRFToken, Data: webhookData{Webhook: wh}})
}

func (h *webhooksHandler) deleteWebhook(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, ok := h.loadWebhook(w, r, se)
	if !ok {
		return
	}
	if err := h.endpoints.Delete(r.Context(), se.TeamID, wh.ID, by(r, se)); err != nil {
		h.failOr404(w, r, err)
		return
	}
	h.logger.Info("webhook deleted", "team_id", se.TeamID, "webhook_id", wh.ID)
	http.Redirect(w, r, "/dashboard/webhooks", http.StatusSeeOther)
}

type webhookEventData struct {
	Webhook  store.Webhook
	Message  messageView
	Attempts []store.WebhookAttempt
	Payload  string
}

// teamMessage loads an endpoint of the session's team and one of its messages.
func (h *webhooksHandler) teamMessage(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Webhook, store.WebhookMessage, bool) {
	hid, err1 := uuid.Parse(r.PathValue("id"))
	mid, err2 := uuid.Parse(r.PathValue("msg"))
	if err1 != nil || err2 != nil {
		http.NotFound(w, r)
		return store.Webhook{}, store.WebhookMessage{}, false
	}
	wh, err := h.endpoints.Get(r.Context(), se.TeamID, hid)
	if err == nil {
		var m store.WebhookMessage
		m, err = h.endpoints.Message(r.Context(), se.TeamID, hid, mid)
		if err == nil {
			return wh, m, true
		}
	}
	h.failOr404(w, r, err)
	return store.Webhook{}, store.WebhookMessage{}, false
}

// webhookEvent shows one event: its payload and every attempt.
func (h *webhooksHandler) webhookEvent(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, m, ok := h.teamMessage(w, r, se)
	if !ok {
		return
	}
	attempts, err := h.endpoints.Attempts(r.Context(), se.TeamID, m.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "webhook_event", view{Title: "Webhook event", Nav: "webhooks", Session: se,
		CSRF: se.CSRFToken, Data: webhookEventData{Webhook: wh, Attempts: attempts, Payload: string(m.Payload),
			Message: messageView{WebhookMessage: m, PublicID: webhook.MessageID(m.ID)}}})
}

// replayWebhookEvent delivers an event again, with the same id.
func (h *webhooksHandler) replayWebhookEvent(w http.ResponseWriter, r *http.Request, se *store.Session) {
	wh, m, ok := h.teamMessage(w, r, se)
	if !ok {
		return
	}
	err := h.endpoints.Replay(r.Context(), wh, m.ID)
	if errors.Is(err, webhook.ErrDisabled) {
		http.Error(w, "The endpoint is disabled; enable it before replaying events.", http.StatusUnprocessableEntity)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/webhooks/"+wh.ID.String()+"/events/"+m.ID.String(), http.StatusSeeOther)
}
