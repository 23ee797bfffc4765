package dashboard

import (
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// teamHandler serves the team and account pages: members, invitations, the
// second factor and the user's sessions (team.go, invites.go, mfa.go,
// sessions.go).
type teamHandler struct{ *Handler }

// routes adds the team and account pages: members, invitations,
// the second factor and the user's sessions.
func (h *teamHandler) routes(m *http.ServeMux) {
	m.HandleFunc("GET /dashboard/invite/{token}", h.invitationPage)
	m.HandleFunc("POST /dashboard/invite/{token}", h.joinAsNewUser)
	m.Handle("POST /dashboard/invite/{token}/accept", h.signedIn(h.acceptInvitation))
	m.Handle("GET /dashboard/login/mfa", h.pendingMFA(h.mfaPage))
	m.Handle("POST /dashboard/login/mfa", h.pendingMFA(h.mfa))
	m.Handle("GET /dashboard/account", h.signedIn(h.account))
	m.Handle("POST /dashboard/account/mfa/start", h.signedIn(h.startMFA))
	m.Handle("POST /dashboard/account/mfa/confirm", h.signedIn(h.confirmMFA))
	m.Handle("POST /dashboard/account/mfa/disable", h.signedIn(h.disableMFA))
	m.Handle("POST /dashboard/account/team-mfa", h.signedIn(h.teamMFA))
	m.Handle("POST /dashboard/account/team", h.signedIn(h.switchTeam))
	m.Handle("POST /dashboard/account/sessions/revoke", h.signedIn(h.revokeSession))
	m.Handle("POST /dashboard/account/sessions/revoke-others", h.signedIn(h.revokeOtherSessions))
	m.Handle("GET /dashboard/team", h.signedIn(h.team))
	m.Handle("POST /dashboard/team/password", h.signedIn(h.changePassword))
	m.Handle("POST /dashboard/team/confirm-address", h.signedIn(h.confirmAddress))
	m.Handle("POST /dashboard/team/members/{id}/remove", h.signedIn(h.removeMember))
	m.Handle("POST /dashboard/team/invitations", h.signedIn(h.invite))
	m.Handle("POST /dashboard/team/invitations/{id}/revoke", h.signedIn(h.revokeInvitation))
}

type teamData struct {
	Members     []store.Member
	Invitations []store.Invitation // owners only
	Owner       bool
	Self        uuid.UUID
	Now         time.Time // marks expired invitations
	// InviteLink is a new invitation's link, shown when no email took it.
	InviteLink string
	// Address is the signed-in user's, with how to confirm it when it is
	// unproven.
	Address addressData
	Message string
	Error   string
}

func (h *teamHandler) team(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderTeam(w, r, se, http.StatusOK, teamData{})
}

func (h *teamHandler) renderTeam(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d teamData) {
	members, err := h.accounts.Members.Members(r.Context(), se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Members, d.Self, d.Now = members, se.UserID, h.now()
	if d.Address, err = h.addressState(r.Context(), se.UserID); err != nil {
		h.fail(w, r, err)
		return
	}
	for _, m := range members {
		if m.UserID == se.UserID && m.Role == "owner" {
			d.Owner = true
		}
	}
	if d.Owner {
		if d.Invitations, err = h.accounts.Members.Invitations(r.Context(), se.TeamID); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	h.render(w, status, "team", view{Title: "Team", Nav: "team", Session: se, CSRF: se.CSRFToken, Data: d})
}

// changePassword checks the current password (users who signed up through
// a provider have none and may set one), stores the new one and ends the
// user's other sessions.
func (h *teamHandler) changePassword(w http.ResponseWriter, r *http.Request, se *store.Session) {
	current, next, confirm := r.PostFormValue("current"), r.PostFormValue("new"), r.PostFormValue("confirm")
	hash, err := h.accounts.Members.PasswordHash(r.Context(), se.UserID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if hash != "" {
		ok, err := h.passwords.Verify(r.Context(), current, hash)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if !ok {
			h.renderTeam(w, r, se, http.StatusUnprocessableEntity, teamData{Error: "The current password is wrong."})
			return
		}
	}
	newHash, ok := h.newPassword(w, r, next, confirm, func(problem string) {
		h.renderTeam(w, r, se, http.StatusUnprocessableEntity, teamData{Error: problem})
	})
	if !ok {
		return
	}
	if err := h.accounts.Members.SetPassword(r.Context(), se.UserID, newHash, se.IDHash, by(r, se)); err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderTeam(w, r, se, http.StatusOK, teamData{Message: "Password changed. Your other sessions were signed out."})
}

// removeMember lets an owner take a member out of the team.
func (h *teamHandler) removeMember(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, func() {
		h.renderTeam(w, r, se, http.StatusForbidden, teamData{Error: "Only team owners can remove members."})
	}) {
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	revoked, err := h.accounts.Members.RemoveMember(r.Context(), se.TeamID, id, audit.Entry{ActorType: audit.ActorUser,
		ActorID: &se.UserID, ClientAddr: clientIP(r), UserAgent: r.UserAgent()})
	switch {
	case errors.Is(err, store.ErrNotFound):
		http.NotFound(w, r)
		return
	case errors.Is(err, store.ErrConflict):
		h.renderTeam(w, r, se, http.StatusConflict, teamData{Error: "A team keeps at least one owner."})
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	// The keys the member made went with them; this process stops
	// accepting them at once, the others within their cache's TTL.
	for _, k := range revoked {
		if h.cfg.Auth != nil {
			h.cfg.Auth.Forget(k.Hash)
		}
	}
	http.Redirect(w, r, "/dashboard/team", http.StatusSeeOther)
}

// switchTeam moves the session to another team of the user's (POST
// /dashboard/account/team with `team`). A team the user is not a member
// of, or no team id at all, is a 404 like any other team's page. A team
// that requires two-factor authentication the user has not set up sends
// them to the Account page, as signing in would.
func (h *teamHandler) switchTeam(w http.ResponseWriter, r *http.Request, se *store.Session) {
	id, err := uuid.Parse(r.PostFormValue("team"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch err := h.accounts.Members.SwitchTeam(r.Context(), se.IDHash, id); {
	case errors.Is(err, store.ErrNotFound):
		http.NotFound(w, r)
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	h.logger.Info("team switched", "team_id", id)
	http.Redirect(w, r, "/dashboard/emails", http.StatusSeeOther)
}

// confirmAddress emails the signed-in user, whose address is unproven, a
// link that confirms it by choosing a password (a reset link: using it
// proves the address, store.ResetPassword). It counts against the
// address's hourly email limit; the user learns when it is reached, since
// the address is their own.
func (h *teamHandler) confirmAddress(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if h.cfg.Mailer == nil {
		h.renderTeam(w, r, se, http.StatusServiceUnavailable, teamData{Error: "Email is not set up on this server, " +
			"so no confirmation link can be sent."})
		return
	}
	u, err := h.accounts.Members.User(r.Context(), se.UserID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if u.EmailVerifiedAt != nil {
		h.renderTeam(w, r, se, http.StatusOK, teamData{Message: "Your address is already confirmed."})
		return
	}
	err = h.accounts.Members.ReserveResetMail(r.Context(), u.Email, h.mailLimits(), h.now())
	if errors.Is(err, store.ErrAddressMailLimit) {
		h.renderTeam(w, r, se, http.StatusTooManyRequests, teamData{Error: "Too many emails went to your address in the " +
			"last hour. Try again later."})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.signInHandler.mailReset(r.Context(), u, true); err != nil {
		h.logger.Error("sending an address confirmation link", "err", err)
		h.renderTeam(w, r, se, http.StatusBadGateway, teamData{Error: "The confirmation email could not be sent. Try again later."})
		return
	}
	h.logger.Info("address confirmation link sent")
	h.renderTeam(w, r, se, http.StatusOK, teamData{Message: "We emailed " + u.Email + " a link. Open it and choose a " +
		"password to confirm your address; it works once, within an hour."})
}
