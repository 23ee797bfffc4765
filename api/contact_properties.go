package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

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

// propertyKey is Resend's rule for property keys: at most 50 letters,
// digits and underscores.
var propertyKey = regexp.MustCompile(`^[A-Za-z0-9_]{1,50}$`)

// contactPropertyRequest is the body of create and update. FallbackValue
// stays raw so that an explicit null can be told from an absent field.
type contactPropertyRequest struct {
	Key           *string         `json:"key"`
	Type          *string         `json:"type"`
	FallbackValue json.RawMessage `json:"fallback_value"`
}

// propertyValue checks that v (decoded JSON) is a value of a property of
// type typ (audience.PropertyValue).
func propertyValue(typ string, v any, what string) error { return audience.PropertyValue(typ, v, what) }

// fallbackValue decodes a fallback_value for a property of type typ; null
// or absent is nil.
func fallbackValue(typ string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, validation("The `fallback_value` field must be a string or a number.")
	}
	if v == nil {
		return nil, nil
	}
	if err := propertyValue(typ, v, "The `fallback_value` field of a "+typ+" property"); err != nil {
		return nil, err
	}
	return v, nil
}

func (s *audienceAPI) createContactProperty(c *gin.Context) {
	var req contactPropertyRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	switch {
	case req.Key == nil:
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `key` field."))
		return
	case req.Type == nil:
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `type` field."))
		return
	case !propertyKey.MatchString(*req.Key):
		s.respondError(c, validation("The `key` field must be 1 to 50 letters, digits or underscores."))
		return
	case *req.Type != store.PropertyString && *req.Type != store.PropertyNumber:
		s.respondError(c, validation("The `type` field must be `string` or `number`."))
		return
	}
	fb, err := fallbackValue(*req.Type, req.FallbackValue)
	if err != nil {
		s.respondError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	p, err := s.store.Audience.CreateContactProperty(c.Request.Context(), store.ContactProperty{ID: id,
		TeamID: principal(c).TeamID, Key: *req.Key, Type: *req.Type, Fallback: fb})
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
	respondList(s.Server, c, s.store.Audience.ListContactProperties, renderContactProperty)
}

func (s *audienceAPI) getContactProperty(c *gin.Context) {
	respondOne(s.Server, c, s.store.Audience.ContactProperty, "Contact property not found.", renderContactProperty)
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
	ctx, team := c.Request.Context(), principal(c).TeamID
	p, err := s.store.Audience.ContactProperty(ctx, team, id)
	if err != nil {
		s.respondError(c, notFound(err, "Contact property not found."))
		return
	}
	if req.Key != nil && *req.Key != p.Key || req.Type != nil && *req.Type != p.Type {
		s.respondError(c, validation("The `key` and `type` of a contact property cannot be changed."))
		return
	}
	fb, err := fallbackValue(p.Type, req.FallbackValue)
	if err != nil {
		s.respondError(c, err)
		return
	}
	if len(req.FallbackValue) == 0 {
		fb = p.Fallback // absent: unchanged
	}
	if _, err := s.store.Audience.SetContactPropertyFallback(ctx, team, id, fb); err != nil {
		s.respondError(c, notFound(err, "Contact property not found."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "contact_property", "id": id.String()})
}

func (s *audienceAPI) deleteContactProperty(c *gin.Context) {
	respondOne(s.Server, c, s.store.Audience.DeleteContactProperty, "Contact property not found.", func(p store.ContactProperty) gin.H {
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
