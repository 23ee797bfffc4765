package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/store"
)

// keysAPI serves /api-keys through the accounts service.
type keysAPI struct {
	*Server
	keys *account.Keys
}

type createAPIKeyRequest struct {
	Name       *string `json:"name"`
	Permission string  `json:"permission"`
	DomainID   *string `json:"domain_id"`
	// AllowedIPs is a Posthaste extension: the client address ranges the
	// key may be used from.
	AllowedIPs []string `json:"allowed_ips"`
}

func (s *keysAPI) createAPIKey(c *gin.Context) {
	body, err := readBody(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req createAPIKeyRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The request body must be a JSON object with a string `name`."))
		return
	}
	in := account.KeyInput{TeamID: principal(c).TeamID, CreatedBy: principal(c).CreatedBy, Permission: req.Permission,
		DomainID: req.DomainID, AllowedIPs: req.AllowedIPs}
	if req.Name != nil {
		in.Name = *req.Name
	}
	// The new key is its maker's: a full_access key only when the calling
	// key's creator owns the team.
	key, err := s.keys.Create(c.Request.Context(), in, s.actor(c))
	switch {
	case errors.Is(err, account.ErrInvalidDomainID):
		err = errorf(http.StatusUnprocessableEntity, nameInvalidParameter, account.ErrInvalidDomainID.Message)
	case errors.Is(err, store.ErrNotFound):
		err = errorf(http.StatusNotFound, nameNotFound, "Domain not found.")
	case errors.Is(err, store.ErrOwnersOnly):
		err = errorf(http.StatusForbidden, nameValidation,
			"Only keys created by a team owner can create full_access keys; create a sending_access key instead.")
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusCreated, gin.H{"id": key.ID, "token": key.Token})
}

type apiKeyJSON struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Permission string   `json:"permission"`
	CreatedAt  string   `json:"created_at"`
	LastUsedAt *string  `json:"last_used_at"`
	AllowedIPs []string `json:"allowed_ips,omitempty"` // Posthaste extension
}

func (s *keysAPI) listAPIKeys(c *gin.Context) {
	respondList(s.Server, c, listAll, s.keys.List, func(k store.APIKey) apiKeyJSON {
		return apiKeyJSON{ID: k.ID.String(), Name: k.Name, Permission: k.Permission,
			CreatedAt: formatTime(k.CreatedAt), LastUsedAt: formatTimePtr(k.LastUsedAt), AllowedIPs: prefixStrings(k.AllowedIPs)}
	})
}

// updateAPIKey renames a key (PATCH /api-keys/{id}, body {name}), as
// Resend's update does: {object, id}; 404 for a key the team does not have.
func (s *keysAPI) updateAPIKey(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req struct {
		Name *string `json:"name"`
	}
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	var name string
	if req.Name != nil {
		name = *req.Name
	}
	if err := s.keys.Rename(c.Request.Context(), principal(c).TeamID, id, name, s.actor(c)); err != nil {
		s.respondError(c, notFound(err, "API key not found."))
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "api_key", "id": id})
}

func (s *keysAPI) deleteAPIKey(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	hash, err := s.keys.Revoke(c.Request.Context(), principal(c).TeamID, id, s.actor(c))
	if hash != nil {
		s.auth.Forget(hash)
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "api_key", "id": id, "deleted": true})
}

func prefixStrings(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}
