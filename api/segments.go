package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/store"
)

type segmentJSON struct {
	Object    string `json:"object"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

func renderSegment(sg store.Segment) segmentJSON { return segmentKind("segment").render(sg) }

// segmentKind is the `object` segments are rendered as: "segment", or
// "audience" on the legacy /audiences routes (audiences.go), where an
// audience is a segment.
type segmentKind string

func (k segmentKind) render(sg store.Segment) segmentJSON {
	return segmentJSON{Object: string(k), ID: sg.ID.String(), Name: sg.Name, CreatedAt: formatTime(sg.CreatedAt)}
}

// missing is the message of the 404 of an id the team has no segment by.
func (k segmentKind) missing() string {
	return strings.ToUpper(string(k[:1])) + string(k[1:]) + " not found."
}

// segmentRequest is the body of POST and PATCH /segments (and POST
// /audiences). Filter is Resend's dynamic segment: its OpenAPI document
// says only "Filter conditions for the segment" (an object) and documents
// no language, so a filter is refused rather than ignored.
type segmentRequest struct {
	Name   *string         `json:"name"`
	Filter json.RawMessage `json:"filter"`
}

// decodeSegmentRequest reads the body and refuses a filter.
func decodeSegmentRequest(c *gin.Context) (segmentRequest, error) {
	var req segmentRequest
	if err := decodeJSON(c, &req); err != nil {
		return req, err
	}
	if f := bytes.TrimSpace(req.Filter); len(f) > 0 && string(f) != "null" {
		return req, validation("Invalid `filter` field. Dynamic segments (filters) are not supported: " +
			"create the segment without `filter` and add contacts to it.")
	}
	return req, nil
}

func (s *audienceAPI) createSegment(c *gin.Context) { createSegmentAs(s, c, "segment") }

func createSegmentAs(s *audienceAPI, c *gin.Context, kind segmentKind) {
	req, err := decodeSegmentRequest(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	sg, err := s.svc.CreateSegment(c.Request.Context(), principal(c).TeamID, req.Name)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": string(kind), "id": sg.ID.String(), "name": sg.Name})
}

func (s *audienceAPI) listSegments(c *gin.Context) { listSegmentsAs(s, c, "segment") }

func listSegmentsAs(s *audienceAPI, c *gin.Context, kind segmentKind) {
	respondList(s.Server, c, listAll, s.svc.ListSegments, kind.render)
}

func (s *audienceAPI) getSegment(c *gin.Context) { getSegmentAs(s, c, "segment") }

func getSegmentAs(s *audienceAPI, c *gin.Context, kind segmentKind) {
	respondOne(s.Server, c, s.svc.Segment, kind.missing(), kind.render)
}

// updateSegment renames a segment (Resend's Node SDK has segments.update).
func (s *audienceAPI) updateSegment(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	req, err := decodeSegmentRequest(c)
	if err != nil {
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

func (s *audienceAPI) deleteSegment(c *gin.Context) { deleteSegmentAs(s, c, "segment") }

func deleteSegmentAs(s *audienceAPI, c *gin.Context, kind segmentKind) {
	respondOne(s.Server, c, s.svc.DeleteSegment, kind.missing(), func(sg store.Segment) gin.H {
		return gin.H{"object": string(kind), "id": sg.ID.String(), "deleted": true}
	})
}
