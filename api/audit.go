package api

import (
	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/audit"
)

// audited records a successful state change by the request's API key in
// the audit log, synchronously, after the change. When the entry cannot
// be written it answers the request with the error (the change stays;
// the failure is logged with its error id) and returns false: an action
// that could not be audited is never reported as a plain success. detail
// is a small object without personal data, or nil.
func (s *Server) audited(c *gin.Context, action audit.Action, targetType, targetID string, detail map[string]any) bool {
	if err := s.auditLog.Success(c.Request.Context(), s.actor(c), principal(c).TeamID, action, targetType, targetID,
		detail); err != nil {
		s.respondError(c, err)
		return false
	}
	return true
}

// actor is the audit actor of a change made by the request's API key, for
// the services that write the entry with the change.
func (s *Server) actor(c *gin.Context) audit.Entry {
	p := principal(c)
	return audit.Entry{TeamID: &p.TeamID, ActorType: audit.ActorAPIKey, ActorID: &p.KeyID, ClientAddr: c.ClientIP(),
		UserAgent: c.Request.UserAgent()}
}
