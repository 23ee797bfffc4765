package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/auth"
)

const principalKey = "principal"

// authenticate requires a live API key. Sending-only keys pass only where
// sending is true.
func (s *Server) authenticate(sending bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.GetHeader("Authorization")
		if h == "" {
			s.respondError(c, errorf(http.StatusUnauthorized, nameMissingAPIKey,
				"Missing API key in the authorization header. Include the header Authorization: Bearer ph_..."))
			return
		}
		scheme, token, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			s.respondError(c, errorf(http.StatusUnauthorized, nameMissingAPIKey,
				"The authorization header must be of the form: Bearer ph_..."))
			return
		}
		p, err := s.auth.Authenticate(c.Request.Context(), strings.TrimSpace(token))
		if errors.Is(err, auth.ErrInvalidKey) {
			s.respondError(c, errorf(http.StatusForbidden, nameInvalidAPIKey, "API key is invalid."))
			return
		}
		if err != nil {
			s.respondError(c, err)
			return
		}
		if !sending && !p.FullAccess() {
			s.respondError(c, errorf(http.StatusUnauthorized, nameRestrictedAPIKey,
				"This API key is restricted to only send emails."))
			return
		}
		c.Set(principalKey, p)
		c.Next()
	}
}

func principal(c *gin.Context) auth.Principal {
	p, _ := c.Get(principalKey)
	return p.(auth.Principal)
}
