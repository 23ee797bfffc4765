package dashboard

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// record appends e to the audit log with the request's client address
// and user agent, synchronously. detail is a small object without
// personal data, or nil.
func (h *Handler) record(r *http.Request, e audit.Entry, detail map[string]any) error {
	e.ClientAddr, e.UserAgent = clientIP(r), r.UserAgent()
	return h.auditSvc.Record(r.Context(), e, detail)
}

// by is the audit actor of an action of the session's user on its team,
// with the request's client address and user agent.
func by(r *http.Request, se *store.Session) audit.Entry {
	return audit.Entry{TeamID: &se.TeamID, ActorType: audit.ActorUser, ActorID: &se.UserID, ClientAddr: clientIP(r),
		UserAgent: r.UserAgent()}
}

// client is the audit actor of an action taken before sign-in: the
// request's client address and user agent (the service names the user).
func client(r *http.Request) audit.Entry {
	return audit.Entry{ClientAddr: clientIP(r), UserAgent: r.UserAgent()}
}

// recordSignIn records a sign-in attempt of user (uuid.Nil when nobody has
// the address given: no address is stored) into team (nil when unknown).
// A success is the user's own action; a failure's actor is unknown and its
// target the user, when there is one. A failure to record is logged and
// does not change the answer: signing in must not depend on the audit log.
func (h *Handler) recordSignIn(r *http.Request, user uuid.UUID, team *uuid.UUID, ok bool, detail map[string]any) {
	e := audit.Entry{TeamID: team, ActorType: audit.ActorUnknown, Action: audit.SignIn, TargetType: "user",
		Outcome: audit.Failure}
	if user != uuid.Nil {
		e.TargetID = user.String()
		if ok {
			e.ActorType, e.ActorID, e.Outcome = audit.ActorUser, &user, audit.Success
		}
	}
	if err := h.record(r, e, detail); err != nil {
		h.logger.Error("recording a sign-in in the audit log", "outcome", e.Outcome, "err", err)
	}
}

// signInFailed records a wrong password or second factor of user
// (uuid.Nil: nobody known), under the user's first team.
func (h *Handler) signInFailed(r *http.Request, user uuid.UUID, detail map[string]any) {
	var team *uuid.UUID
	if user != uuid.Nil {
		if t, err := h.accounts.Sessions.FirstTeam(r.Context(), user); err == nil {
			team = &t
		}
	}
	h.recordSignIn(r, user, team, false, detail)
}
