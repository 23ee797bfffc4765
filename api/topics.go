package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/store"
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

// input is the request as the service takes it.
func (r topicRequest) input() audience.TopicInput {
	return audience.TopicInput{Name: r.Name, Description: r.Description, Visibility: r.Visibility,
		DefaultSubscription: r.DefaultSubscription}
}

func (s *audienceAPI) createTopic(c *gin.Context) {
	var req topicRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	t, err := s.svc.CreateTopic(c.Request.Context(), principal(c).TeamID, req.input())
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "topic", "id": t.ID.String()})
}

func (s *audienceAPI) listTopics(c *gin.Context) {
	respondList(s.Server, c, listAll, s.svc.ListTopics, renderTopic)
}

func (s *audienceAPI) getTopic(c *gin.Context) {
	respondOne(s.Server, c, s.svc.Topic, "Topic not found.", renderTopic)
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
	t, err := s.svc.UpdateTopic(c.Request.Context(), principal(c).TeamID, id, req.input())
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
	t, err := s.svc.DeleteTopic(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, notFound(err, "Topic not found."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "topic", "id": t.ID.String(), "deleted": true})
}
