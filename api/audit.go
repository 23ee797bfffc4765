package api

import (
	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/audit"
)

// actor is the audit actor of a change made by the request's API key, for
// the services, whose store methods write the entry in the change's
// transaction.
func (s *Server) actor(c *gin.Context) audit.Entry {
	p := principal(c)
	return audit.Entry{TeamID: &p.TeamID, ActorType: audit.ActorAPIKey, ActorID: &p.KeyID, ClientAddr: c.ClientIP(),
		UserAgent: c.Request.UserAgent()}
}
