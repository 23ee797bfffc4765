package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/store"
)

type segmentJSON struct {
	Object    string `json:"object"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

func renderSegment(sg store.Segment) segmentJSON {
	return segmentJSON{Object: "segment", ID: sg.ID.String(), Name: sg.Name, CreatedAt: formatTime(sg.CreatedAt)}
}

type segmentRequest struct {
	Name *string `json:"name"`
}

// segmentName checks the name of a create (required) or rename
// (audience.SegmentName).
func segmentName(name *string) (string, error) { return audience.SegmentName(name) }

func (s *audienceAPI) createSegment(c *gin.Context) {
	var req segmentRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	name, err := segmentName(req.Name)
	if err != nil {
		s.respondError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	sg, err := s.store.Audience.CreateSegment(c.Request.Context(), store.Segment{ID: id, TeamID: principal(c).TeamID, Name: name})
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "segment", "id": sg.ID.String(), "name": sg.Name})
}

func (s *audienceAPI) listSegments(c *gin.Context) {
	respondList(s.Server, c, s.store.Audience.ListSegments, renderSegment)
}

func (s *audienceAPI) getSegment(c *gin.Context) {
	respondOne(s.Server, c, s.store.Audience.Segment, "Segment not found.", renderSegment)
}

// updateSegment renames a segment (Resend's Node SDK has segments.update).
func (s *audienceAPI) updateSegment(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req segmentRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	name, err := segmentName(req.Name)
	if err != nil {
		s.respondError(c, err)
		return
	}
	sg, err := s.store.Audience.RenameSegment(c.Request.Context(), principal(c).TeamID, id, name)
	if err != nil {
		s.respondError(c, notFound(err, "Segment not found."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "segment", "id": sg.ID.String()})
}

func (s *audienceAPI) deleteSegment(c *gin.Context) {
	respondOne(s.Server, c, s.store.Audience.DeleteSegment, "Segment not found.", func(sg store.Segment) gin.H {
		return gin.H{"object": "segment", "id": sg.ID.String(), "deleted": true}
	})
}
