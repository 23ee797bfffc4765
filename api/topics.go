package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/store"
)

// Topic webhook event types (webhook.Types).
const (
	eventTopicCreated = audience.EventTopicCreated
	eventTopicUpdated = audience.EventTopicUpdated
	eventTopicDeleted = audience.EventTopicDeleted
)

type topicJSON struct {
	Object              string `json:"object"`
	ID                  string `json:"id"`
	Name                string `json:"name"`
	Description         string `json:"description"`
	DefaultSubscription string `json:"default_subscription"`
	Visibility          string `json:"visibility"`
	CreatedAt           string `json:"created_at"`
}

func renderTopic(t store.Topic) topicJSON {
	return topicJSON{Object: "topic", ID: t.ID.String(), Name: t.Name, Description: t.Description,
		DefaultSubscription: t.DefaultSubscription, Visibility: t.Visibility, CreatedAt: formatTime(t.CreatedAt)}
}

type topicRequest struct {
	Name                *string `json:"name"`
	DefaultSubscription *string `json:"default_subscription"`
	Description         *string `json:"description"`
	Visibility          *string `json:"visibility"`
}

// check validates the fields common to create and update.
func (r topicRequest) check() error { return audience.CheckTopic(r.Name, r.Description, r.Visibility) }

func (s *audienceAPI) createTopic(c *gin.Context) {
	var req topicRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	switch {
	case req.Name == nil:
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `name` field."))
		return
	}
	if err := audience.DefaultSubscription(req.DefaultSubscription); err != nil {
		s.respondError(c, err)
		return
	}
	if err := req.check(); err != nil {
		s.respondError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	t := store.Topic{ID: id, TeamID: principal(c).TeamID, Name: strings.TrimSpace(*req.Name),
		DefaultSubscription: *req.DefaultSubscription, Visibility: "private"}
	if req.Description != nil {
		t.Description = *req.Description
	}
	if req.Visibility != nil {
		t.Visibility = *req.Visibility
	}
	ctx := c.Request.Context()
	t, err = s.store.Audience.CreateTopic(ctx, t, eventTopicCreated)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "topic", "id": t.ID.String()})
}

func (s *audienceAPI) listTopics(c *gin.Context) {
	respondList(s.Server, c, s.store.Audience.ListTopics, renderTopic)
}

func (s *audienceAPI) getTopic(c *gin.Context) {
	respondOne(s.Server, c, s.store.Audience.Topic, "Topic not found.", renderTopic)
}

func (s *audienceAPI) updateTopic(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req topicRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	if err := req.check(); err != nil {
		s.respondError(c, err)
		return
	}
	ctx, team := c.Request.Context(), principal(c).TeamID
	if req.DefaultSubscription != nil {
		cur, err := s.store.Audience.Topic(ctx, team, id)
		if err != nil {
			s.respondError(c, notFound(err, "Topic not found."))
			return
		}
		if cur.DefaultSubscription != *req.DefaultSubscription {
			s.respondError(c, validation("The `default_subscription` of a topic cannot be changed after creation."))
			return
		}
	}
	if req.Name != nil {
		n := strings.TrimSpace(*req.Name)
		req.Name = &n
	}
	t, err := s.store.Audience.UpdateTopic(ctx, team, id, store.TopicUpdate{Name: req.Name, Description: req.Description,
		Visibility: req.Visibility}, eventTopicUpdated)
	if err != nil {
		s.respondError(c, notFound(err, "Topic not found."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "topic", "id": t.ID.String()})
}

func (s *audienceAPI) deleteTopic(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	ctx, team := c.Request.Context(), principal(c).TeamID
	t, err := s.store.Audience.DeleteTopic(ctx, team, id, eventTopicDeleted)
	if err != nil {
		s.respondError(c, notFound(err, "Topic not found."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "topic", "id": t.ID.String(), "deleted": true})
}
