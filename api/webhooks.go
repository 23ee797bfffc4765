package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/webhook"
)

// webhooksAPI serves /webhooks: endpoints, their events and attempts,
// through the use case shared with the dashboard.
type webhooksAPI struct {
	*Server
	endpoints *webhook.Endpoints
}

type webhookRequest struct {
	Endpoint *string   `json:"endpoint"`
	Events   *[]string `json:"events"`
	Status   *string   `json:"status"`
}

func (s *webhooksAPI) createWebhook(c *gin.Context) {
	var req webhookRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	if req.Endpoint == nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `endpoint` field."))
		return
	}
	if req.Events == nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `events` field."))
		return
	}
	w, secret, err := s.endpoints.Create(c.Request.Context(), principal(c).TeamID, *req.Endpoint, *req.Events, s.actor(c))
	if errors.Is(err, webhook.ErrNoMasterKey) {
		err = errorf(http.StatusInternalServerError, nameApplicationError,
			"Webhooks cannot be added: the server has no master key (POSTHASTE_MASTER_KEY) to protect their secrets.")
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	s.logger.Info("webhook created", "team_id", w.TeamID, "webhook_id", w.ID, "request_id", requestID(c))
	c.JSON(http.StatusCreated, gin.H{"object": "webhook", "id": w.ID, "signing_secret": secret})
}

type webhookJSON struct {
	Object        string   `json:"object"`
	ID            string   `json:"id"`
	Endpoint      string   `json:"endpoint"`
	Events        []string `json:"events"`
	Status        string   `json:"status"`
	CreatedAt     string   `json:"created_at"`
	SigningSecret string   `json:"signing_secret,omitempty"`
}

func renderWebhook(w store.Webhook) webhookJSON {
	return webhookJSON{Object: "webhook", ID: w.ID.String(), Endpoint: w.Endpoint, Events: w.Events,
		Status: w.Status, CreatedAt: formatTime(w.CreatedAt)}
}

func (s *webhooksAPI) listWebhooks(c *gin.Context) {
	respondList(s.Server, c, paged, s.endpoints.List, renderWebhook)
}

// teamWebhook loads the :id webhook of the caller's team.
func (s *webhooksAPI) teamWebhook(c *gin.Context) (store.Webhook, bool) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return store.Webhook{}, false
	}
	w, err := s.endpoints.Get(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return store.Webhook{}, false
	}
	return w, true
}

func (s *webhooksAPI) getWebhook(c *gin.Context) {
	w, ok := s.teamWebhook(c)
	if !ok {
		return
	}
	secret, err := s.endpoints.Secret(w)
	if err != nil {
		s.respondError(c, err)
		return
	}
	j := renderWebhook(w)
	j.SigningSecret = secret
	c.JSON(http.StatusOK, j)
}

func (s *webhooksAPI) updateWebhook(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req webhookRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	if err := s.endpoints.Update(c.Request.Context(), principal(c).TeamID, id, webhook.Change{
		Endpoint: req.Endpoint, Events: req.Events, Status: req.Status}, s.actor(c)); err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "webhook", "id": id})
}

func (s *webhooksAPI) deleteWebhook(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	if err := s.endpoints.Delete(c.Request.Context(), principal(c).TeamID, id, s.actor(c)); err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "webhook", "id": id, "deleted": true})
}

func (s *webhooksAPI) rotateWebhookSecret(c *gin.Context) {
	w, ok := s.teamWebhook(c)
	if !ok {
		return
	}
	secret, err := s.endpoints.Rotate(c.Request.Context(), w, s.actor(c))
	if errors.Is(err, webhook.ErrNoMasterKey) {
		err = errorf(http.StatusInternalServerError, nameApplicationError,
			"The secret cannot be rotated: the server has no master key (POSTHASTE_MASTER_KEY).")
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	s.logger.Info("webhook secret rotated", "team_id", w.TeamID, "webhook_id", w.ID, "request_id", requestID(c))
	c.JSON(http.StatusOK, gin.H{"object": "webhook", "id": w.ID, "signing_secret": secret})
}

type webhookEventJSON struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Status    string `json:"status"`
}

func renderMessage(m store.WebhookMessage) webhookEventJSON {
	return webhookEventJSON{ID: webhook.MessageID(m.ID), Type: m.Type, CreatedAt: formatTime(m.CreatedAt), Status: m.Status}
}

// messageID parses an event id: msg_<uuid> (or the bare uuid).
func messageID(v string) (uuid.UUID, error) {
	id, err := uuid.Parse(strings.TrimPrefix(v, "msg_"))
	if err != nil {
		return uuid.Nil, errorf(http.StatusUnprocessableEntity, nameInvalidParameter,
			"The event id must look like msg_<uuid>.")
	}
	return id, nil
}

func (s *webhooksAPI) listWebhookEvents(c *gin.Context) {
	w, ok := s.teamWebhook(c)
	if !ok {
		return
	}
	// Cursors are event ids; page() parses bare ids.
	q := c.Request.URL.Query()
	for _, k := range []string{"after", "before"} {
		if v := q.Get(k); v != "" {
			q.Set(k, strings.TrimPrefix(v, "msg_"))
		}
	}
	c.Request.URL.RawQuery = q.Encode()
	p, err := page(c, paged)
	if err != nil {
		s.respondError(c, err)
		return
	}
	ms, more, err := s.endpoints.Messages(c.Request.Context(), w.TeamID, w.ID, p)
	if err != nil {
		s.respondError(c, err)
		return
	}
	out := make([]webhookEventJSON, len(ms))
	for i, m := range ms {
		out[i] = renderMessage(m)
	}
	c.JSON(http.StatusOK, list(out, more))
}

// teamMessage loads the :event_id message of the :id webhook of the team.
func (s *webhooksAPI) teamMessage(c *gin.Context) (store.Webhook, store.WebhookMessage, bool) {
	w, ok := s.teamWebhook(c)
	if !ok {
		return w, store.WebhookMessage{}, false
	}
	mid, err := messageID(c.Param("event_id"))
	if err != nil {
		s.respondError(c, err)
		return w, store.WebhookMessage{}, false
	}
	m, err := s.endpoints.Message(c.Request.Context(), w.TeamID, w.ID, mid)
	if err != nil {
		s.respondError(c, err)
		return w, m, false
	}
	return w, m, true
}

func (s *webhooksAPI) getWebhookEvent(c *gin.Context) {
	_, m, ok := s.teamMessage(c)
	if !ok {
		return
	}
	next := formatTimePtr(m.NextAttemptAt)
	if m.Status == store.MessageSuccess || m.Status == store.MessageFailed {
		next = nil
	}
	c.JSON(http.StatusOK, struct {
		Object string `json:"object"`
		webhookEventJSON
		NextAttemptAt *string         `json:"next_attempt_at"`
		Payload       json.RawMessage `json:"payload"`
	}{"webhook_event", renderMessage(m), next, m.Payload})
}

// attemptJSON is Resend's WebhookEventAttempt (id, http_status_code,
// response, sent_at) with Posthaste's own names of the same values kept
// (attempted_at, response_status, response_body) and what Resend does not
// say (duration_ms, error). The status is null when no response arrived.
type attemptJSON struct {
	Object         string  `json:"object,omitempty"`
	ID             string  `json:"id"`
	EventID        string  `json:"event_id,omitempty"`
	HTTPStatusCode *int    `json:"http_status_code"`
	Response       string  `json:"response"`
	SentAt         string  `json:"sent_at"`
	AttemptedAt    string  `json:"attempted_at"`
	ResponseStatus *int    `json:"response_status"`
	ResponseBody   string  `json:"response_body"`
	DurationMS     int     `json:"duration_ms"`
	Error          *string `json:"error"`
}

func renderAttempt(a store.WebhookAttempt) attemptJSON {
	at := formatTime(a.AttemptedAt)
	j := attemptJSON{ID: a.ID.String(), HTTPStatusCode: a.ResponseStatus, Response: a.ResponseBody, SentAt: at,
		AttemptedAt: at, ResponseStatus: a.ResponseStatus, ResponseBody: a.ResponseBody, DurationMS: a.DurationMS}
	if a.Error != "" {
		e := a.Error
		j.Error = &e
	}
	return j
}

func (s *webhooksAPI) listWebhookAttempts(c *gin.Context) {
	w, m, ok := s.teamMessage(c)
	if !ok {
		return
	}
	as, err := s.endpoints.Attempts(c.Request.Context(), w.TeamID, m.ID)
	if err != nil {
		s.respondError(c, err)
		return
	}
	out := make([]attemptJSON, len(as))
	for i, a := range as {
		out[i] = renderAttempt(a)
	}
	c.JSON(http.StatusOK, list(out, false))
}

func (s *webhooksAPI) replayWebhookEvent(c *gin.Context) {
	w, m, ok := s.teamMessage(c)
	if !ok {
		return
	}
	err := s.endpoints.Replay(c.Request.Context(), w, m.ID)
	if errors.Is(err, webhook.ErrDisabled) {
		err = validation("The webhook is disabled; enable it before replaying events.")
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "webhook_event", "id": webhook.MessageID(m.ID)})
}

type testEventRequest struct {
	Type *string `json:"type"`
}

// testWebhook sends a sample event now, once, and answers with the attempt.
func (s *webhooksAPI) testWebhook(c *gin.Context) {
	w, ok := s.teamWebhook(c)
	if !ok {
		return
	}
	var req testEventRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	typ := ""
	if req.Type != nil {
		if *req.Type == "" {
			s.respondError(c, validation("The `type` field must be one of %s.", strings.Join(webhook.Types, ", ")))
			return
		}
		typ = *req.Type
	}
	row, err := s.endpoints.Test(c.Request.Context(), w, typ)
	if err != nil {
		s.respondError(c, err)
		return
	}
	j := renderAttempt(row)
	j.Object, j.EventID = "webhook_attempt", webhook.MessageID(row.MessageID)
	c.JSON(http.StatusOK, j)
}
