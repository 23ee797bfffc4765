package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

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

func (s *audienceAPI) createSegment(c *gin.Context) {
	var req segmentRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	sg, err := s.svc.CreateSegment(c.Request.Context(), principal(c).TeamID, req.Name)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "segment", "id": sg.ID.String(), "name": sg.Name})
}

func (s *audienceAPI) listSegments(c *gin.Context) {
	respondList(s.Server, c, listAll, s.svc.ListSegments, renderSegment)
}

func (s *audienceAPI) getSegment(c *gin.Context) {
	respondOne(s.Server, c, s.svc.Segment, "Segment not found.", renderSegment)
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
	sg, err := s.svc.RenameSegment(c.Request.Context(), principal(c).TeamID, id, req.Name)
	if err != nil {
		s.respondError(c, notFound(err, "Segment not found."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "segment", "id": sg.ID.String()})
}

func (s *audienceAPI) deleteSegment(c *gin.Context) {
	respondOne(s.Server, c, s.svc.DeleteSegment, "Segment not found.", func(sg store.Segment) gin.H {
		return gin.H{"object": "segment", "id": sg.ID.String(), "deleted": true}
	})
}
