package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/sandbox"
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
	respondList(s.Server, c, s.store.Emails.ListSuppressions, renderSuppression)
}

// suppressionAddress checks an address given to the suppression endpoints.
func suppressionAddress(raw string) (string, error) {
	a, err := address.ParseBare(raw)
	if err != nil {
		return "", validation("The `email` field must be an email address such as someone@example.com.")
	}
	if _, ok := sandbox.Outcome(a.Addr()); ok || sandbox.IsDomain(a.Domain) {
		return "", validation("Sandbox addresses of %s cannot be suppressed.", sandbox.Domain)
	}
	return address.Normalize(a.Addr()), nil
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
	if err := requireEmail(req.Email); err != nil {
		s.respondError(c, err)
		return
	}
	addr, err := suppressionAddress(*req.Email)
	if err != nil {
		s.respondError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	sp, _, err := s.store.Emails.AddSuppression(c.Request.Context(), store.Suppression{ID: id, TeamID: principal(c).TeamID,
		Email: addr, Reason: store.SuppressionManual})
	if err != nil {
		s.respondError(c, err)
		return
	}
	if !s.audited(c, audit.SuppressionCreate, "suppression", sp.ID.String(), nil) {
		return
	}
	c.JSON(http.StatusCreated, renderSuppression(sp))
}

// deleteSuppression takes an entry's id or its address.
func (s *emailsAPI) deleteSuppression(c *gin.Context) {
	ref := c.Param("id")
	var id *uuid.UUID
	var addr string
	if u, err := uuid.Parse(ref); err == nil {
		id = &u
	} else if strings.Contains(ref, "@") {
		a, err := address.Parse(ref)
		if err != nil {
			s.respondError(c, errorf(http.StatusUnprocessableEntity, nameInvalidParameter,
				"The path must end in a suppression id or an email address."))
			return
		}
		addr = a.Addr()
	} else {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameInvalidParameter,
			"The path must end in a suppression id or an email address."))
		return
	}
	sp, err := s.store.Emails.DeleteSuppression(c.Request.Context(), principal(c).TeamID, id, addr)
	if errors.Is(err, store.ErrNotFound) {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "Suppression not found."))
		return
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	if !s.audited(c, audit.SuppressionDelete, "suppression", sp.ID.String(), nil) {
		return
	}
	j := renderSuppression(sp)
	c.JSON(http.StatusOK, struct {
		suppressionJSON
		Deleted bool `json:"deleted"`
	}{j, true})
}
