package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// GET /audit-log: the team's audit entries (audit.go writes them).

type auditEntryJSON struct {
	Object     string          `json:"object"`
	ID         string          `json:"id"`
	CreatedAt  string          `json:"created_at"`
	Action     string          `json:"action"`
	ActorType  string          `json:"actor_type"`
	ActorID    *string         `json:"actor_id"`
	TargetType string          `json:"target_type"`
	TargetID   string          `json:"target_id"`
	ClientAddr string          `json:"client_address"`
	UserAgent  string          `json:"user_agent"`
	Outcome    string          `json:"outcome"`
	Detail     json.RawMessage `json:"detail"`
}

func renderAudit(e audit.Entry) auditEntryJSON {
	var actor *string
	if e.ActorID != nil {
		a := e.ActorID.String()
		actor = &a
	}
	detail := json.RawMessage(e.Detail)
	if !json.Valid(detail) {
		detail = json.RawMessage("{}")
	}
	return auditEntryJSON{Object: "audit_log_entry", ID: e.ID.String(), CreatedAt: formatTime(e.CreatedAt),
		Action: string(e.Action), ActorType: string(e.ActorType), ActorID: actor, TargetType: e.TargetType,
		TargetID: e.TargetID, ClientAddr: e.ClientAddr, UserAgent: e.UserAgent, Outcome: string(e.Outcome),
		Detail: detail}
}

// listAuditLog answers GET /audit-log: the team's entries, newest first.
func (s *privacyAPI) listAuditLog(c *gin.Context) {
	f, err := audit.ParseFilter(c.Query)
	if err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation, err.Error()))
		return
	}
	respondList(s.Server, c, paged, func(ctx context.Context, team uuid.UUID, p store.Page) ([]audit.Entry, bool, error) {
		return s.auditLog.List(ctx, team, f, p)
	}, renderAudit)
}
