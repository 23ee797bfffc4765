package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/store"
)

type contactPropertyJSON struct {
	Object        string `json:"object"`
	ID            string `json:"id"`
	Key           string `json:"key"`
	Type          string `json:"type"`
	FallbackValue any    `json:"fallback_value"`
	CreatedAt     string `json:"created_at"`
}

func renderContactProperty(p store.ContactProperty) contactPropertyJSON {
	return contactPropertyJSON{Object: "contact_property", ID: p.ID.String(), Key: p.Key, Type: p.Type,
		FallbackValue: p.Fallback, CreatedAt: formatTime(p.CreatedAt)}
}

// contactPropertyRequest is the body of create and update. FallbackValue
// stays raw so that an explicit null can be told from an absent field.
type contactPropertyRequest struct {
	Key           *string         `json:"key"`
	Type          *string         `json:"type"`
	FallbackValue json.RawMessage `json:"fallback_value"`
}

// fallbackValue decodes a fallback_value for a property of type typ
// (audience.FallbackValue).
func fallbackValue(typ string, raw json.RawMessage) (any, error) {
	return audience.FallbackValue(typ, raw)
}

// input is the request as the service takes it.
func (r contactPropertyRequest) input() audience.PropertyInput {
	return audience.PropertyInput{Key: r.Key, Type: r.Type, FallbackValue: r.FallbackValue}
}

func (s *audienceAPI) createContactProperty(c *gin.Context) {
	var req contactPropertyRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	p, err := s.svc.CreateProperty(c.Request.Context(), principal(c).TeamID, req.input())
	if errors.Is(err, store.ErrConflict) {
		s.respondError(c, errorf(http.StatusConflict, nameConflict, "A contact property with key `"+*req.Key+"` already exists."))
		return
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "contact_property", "id": p.ID.String()})
}

func (s *audienceAPI) listContactProperties(c *gin.Context) {
	respondList(s.Server, c, paged, s.svc.ListProperties, renderContactProperty)
}

func (s *audienceAPI) getContactProperty(c *gin.Context) {
	respondOne(s.Server, c, s.svc.Property, "Contact property not found.", renderContactProperty)
}

// updateContactProperty changes the fallback value; key and type are
// fixed at creation (changing them would invalidate stored values).
func (s *audienceAPI) updateContactProperty(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req contactPropertyRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	if _, err := s.svc.UpdateProperty(c.Request.Context(), principal(c).TeamID, id, req.input()); err != nil {
		s.respondError(c, notFound(err, "Contact property not found."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "contact_property", "id": id.String()})
}

func (s *audienceAPI) deleteContactProperty(c *gin.Context) {
	respondOne(s.Server, c, s.svc.DeleteProperty, "Contact property not found.", func(p store.ContactProperty) gin.H {
		return gin.H{"object": "contact_property", "id": p.ID.String(), "deleted": true}
	})
}

// notFound gives ErrNotFound a message naming the resource; other errors
// pass unchanged.
func notFound(err error, message string) error {
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nameNotFound, message)
	}
	return err
}
