package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/store"
)

// keysAPI serves /api-keys.
type keysAPI struct{ *Server }

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
	if req.Name == nil || strings.TrimSpace(*req.Name) == "" {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `name` field."))
		return
	}
	if utf8.RuneCountInString(*req.Name) > 50 {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The `name` field must be at most 50 characters."))
		return
	}
	switch req.Permission {
	case "":
		req.Permission = store.PermissionFullAccess
	case store.PermissionFullAccess, store.PermissionSendingAccess:
	default:
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The `permission` field must be full_access or sending_access."))
		return
	}
	var domainID *uuid.UUID
	if req.DomainID != nil {
		if req.Permission != store.PermissionSendingAccess {
			s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
				"The `domain_id` field can only be used with sending_access permission."))
			return
		}
		did, err := uuid.Parse(*req.DomainID)
		if err != nil {
			s.respondError(c, errorf(http.StatusUnprocessableEntity, nameInvalidParameter,
				"The `domain_id` field must be a valid UUID."))
			return
		}
		if _, err := s.store.Domains.GetDomain(c.Request.Context(), principal(c).TeamID, did); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = errorf(http.StatusNotFound, nameNotFound, "Domain not found.")
			}
			s.respondError(c, err)
			return
		}
		domainID = &did
	}
	allowed, err := auth.ParseAllowedIPs(req.AllowedIPs)
	if err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The `allowed_ips` field: "+err.Error()+"."))
		return
	}
	token, prefix, hash, err := auth.NewToken()
	if err != nil {
		s.respondError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	k := store.APIKey{ID: id, TeamID: principal(c).TeamID, Name: strings.TrimSpace(*req.Name),
		Prefix: prefix, Hash: hash, Permission: req.Permission, DomainID: domainID, AllowedIPs: allowed,
		CreatedBy: principal(c).CreatedBy}
	// The new key is its maker's: a full_access key only when the calling
	// key's creator owns the team (store.CreateAPIKey keeps the rule).
	if err := s.store.Accounts.CreateAPIKey(c.Request.Context(), k); err != nil {
		if errors.Is(err, store.ErrOwnersOnly) {
			err = errorf(http.StatusForbidden, nameValidation,
				"Only keys created by a team owner can create full_access keys; create a sending_access key instead.")
		}
		s.respondError(c, err)
		return
	}
	if !s.audited(c, audit.APIKeyCreate, "api_key", id.String(), map[string]any{"permission": req.Permission}) {
		return
	}
	c.PureJSON(http.StatusCreated, gin.H{"id": id, "token": token})
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
	respondList(s.Server, c, s.store.Accounts.ListAPIKeys, func(k store.APIKey) apiKeyJSON {
		return apiKeyJSON{ID: k.ID.String(), Name: k.Name, Permission: k.Permission,
			CreatedAt: formatTime(k.CreatedAt), LastUsedAt: formatTimePtr(k.LastUsedAt), AllowedIPs: prefixStrings(k.AllowedIPs)}
	})
}

func (s *keysAPI) deleteAPIKey(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	hash, err := s.store.Accounts.RevokeAPIKey(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	s.auth.Forget(hash)
	if !s.audited(c, audit.APIKeyRevoke, "api_key", id.String(), nil) {
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
