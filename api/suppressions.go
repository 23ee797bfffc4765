package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/store"
)

type suppressionJSON struct {
	Object    string  `json:"object"`
	ID        string  `json:"id"`
	Email     string  `json:"email"`
	Reason    string  `json:"reason"`
	CreatedAt string  `json:"created_at"`
	EmailID   *string `json:"email_id"`
}

func renderSuppression(sp store.Suppression) suppressionJSON {
	j := suppressionJSON{Object: "suppression", ID: sp.ID.String(), Email: sp.Email, Reason: sp.Reason,
		CreatedAt: formatTime(sp.CreatedAt)}
	if sp.EmailID != nil {
		id := sp.EmailID.String()
		j.EmailID = &id
	}
	return j
}

func (s *emailsAPI) listSuppressions(c *gin.Context) {
	respondList(s.Server, c, paged, s.emails.ListSuppressions, renderSuppression)
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
