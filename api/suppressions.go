package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// suppressionJSON is Resend's suppression (origin, source_id) with
// Posthaste's earlier names of the same values kept (reason, email_id).
type suppressionJSON struct {
	Object    string  `json:"object"`
	ID        string  `json:"id"`
	Email     string  `json:"email"`
	Origin    string  `json:"origin"`
	SourceID  *string `json:"source_id"`
	Reason    string  `json:"reason"`
	CreatedAt string  `json:"created_at"`
	EmailID   *string `json:"email_id"`
}

func renderSuppression(sp store.Suppression) suppressionJSON {
	j := suppressionJSON{Object: "suppression", ID: sp.ID.String(), Email: sp.Email, Origin: sp.Reason,
		Reason: sp.Reason, CreatedAt: formatTime(sp.CreatedAt)}
	if sp.EmailID != nil {
		id := sp.EmailID.String()
		j.EmailID, j.SourceID = &id, &id
	}
	return j
}

func (s *emailsAPI) listSuppressions(c *gin.Context) {
	origin := c.Query("origin")
	respondList(s.Server, c, paged, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.Suppression, bool, error) {
		return s.emails.ListSuppressions(ctx, team, origin, p)
	}, renderSuppression)
}

// getSuppression takes an entry's id or its address.
func (s *emailsAPI) getSuppression(c *gin.Context) {
	sp, err := s.emails.GetSuppression(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	if err != nil {
		s.respondError(c, notFound(err, "Suppression not found."))
		return
	}
	c.JSON(http.StatusOK, renderSuppression(sp))
}

type batchAddSuppressionsRequest struct {
	Emails []string `json:"emails"`
}

// batchAddSuppressions answers Resend's {data: [{object, id}]}, one per
// address in the order given, with the whole entry (a superset).
func (s *emailsAPI) batchAddSuppressions(c *gin.Context) {
	var req batchAddSuppressionsRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	added, err := s.emails.AddSuppressions(c.Request.Context(), principal(c).TeamID, req.Emails, s.actor(c))
	if err != nil {
		s.respondError(c, err)
		return
	}
	out := make([]suppressionJSON, len(added))
	for i, a := range added {
		out[i] = renderSuppression(a.Suppression)
	}
	c.JSON(http.StatusCreated, gin.H{"data": out})
}

type batchRemoveSuppressionsRequest struct {
	Emails []string `json:"emails"`
	IDs    []string `json:"ids"`
}

type removedSuppressionJSON struct {
	Object  string  `json:"object"`
	ID      *string `json:"id"`
	Email   string  `json:"email,omitempty"`
	Deleted bool    `json:"deleted"`
}

// batchRemoveSuppressions answers Resend's {data: [{object, id,
// deleted}]}, one per item asked for, in order; an address without an
// entry has id null and deleted false.
func (s *emailsAPI) batchRemoveSuppressions(c *gin.Context) {
	var req batchRemoveSuppressionsRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	removed, err := s.emails.RemoveSuppressions(c.Request.Context(), principal(c).TeamID, req.Emails, req.IDs, s.actor(c))
	if err != nil {
		s.respondError(c, err)
		return
	}
	out := make([]removedSuppressionJSON, len(removed))
	for i, r := range removed {
		out[i] = removedSuppressionJSON{Object: "suppression", Email: r.Email, Deleted: r.Deleted}
		if r.ID != nil {
			id := r.ID.String()
			out[i].ID = &id
		}
	}
	c.JSON(http.StatusOK, gin.H{"data": out})
}

// requireEmail is the 422 of a request body whose `email` is absent or blank.
func requireEmail(email *string) error {
	if email == nil || strings.TrimSpace(*email) == "" {
		return errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `email` field.")
	}
	return nil
}

type createSuppressionRequest struct {
	Email *string `json:"email"`
}

func (s *emailsAPI) createSuppression(c *gin.Context) {
	var req createSuppressionRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	sp, err := s.emails.AddSuppression(c.Request.Context(), principal(c).TeamID, req.Email, s.actor(c))
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusCreated, renderSuppression(sp))
}

// deleteSuppression takes an entry's id or its address.
func (s *emailsAPI) deleteSuppression(c *gin.Context) {
	sp, err := s.emails.DeleteSuppression(c.Request.Context(), principal(c).TeamID, c.Param("id"), s.actor(c))
	if err != nil {
		s.respondError(c, notFound(err, "Suppression not found."))
		return
	}
	j := renderSuppression(sp)
	c.JSON(http.StatusOK, struct {
		suppressionJSON
		Deleted bool `json:"deleted"`
	}{j, true})
}
