package dashboard

import (
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// minPassword is the shortest password the dashboard accepts.
const minPassword = 10

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

func (h *Handler) team(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderTeam(w, r, se, http.StatusOK, teamData{})
}

func (h *Handler) renderTeam(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d teamData) {
	members, err := h.store.Accounts.Members(r.Context(), se.TeamID)
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
		if d.Invitations, err = h.store.Accounts.Invitations(r.Context(), se.TeamID); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	h.render(w, status, "team", view{Title: "Team", Nav: "team", Session: se, CSRF: se.CSRFToken, Data: d})
}

// newPassword checks a new password and its repetition and returns its
// hash. When they are unfit it answers with refuse, given what to fix (or
// with a failure), and returns false.
func (h *Handler) newPassword(w http.ResponseWriter, r *http.Request, pw, confirm string, refuse func(problem string)) (string, bool) {
	switch {
	case utf8.RuneCountInString(pw) < minPassword:
		refuse("Choose a password of at least 10 characters.")
		return "", false
	case pw != confirm:
		refuse("The two new passwords differ.")
		return "", false
	}
	hash, err := h.passwords.Hash(r.Context(), pw)
	if err != nil {
		h.fail(w, r, err)
		return "", false
	}
	return hash, true
}

// changePassword checks the current password (users who signed up through
// a provider have none and may set one), stores the new one and ends the
// user's other sessions.
func (h *Handler) changePassword(w http.ResponseWriter, r *http.Request, se *store.Session) {
	current, next, confirm := r.PostFormValue("current"), r.PostFormValue("new"), r.PostFormValue("confirm")
	hash, err := h.store.Accounts.UserPasswordHash(r.Context(), se.UserID)
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
	if err := h.store.Accounts.SetPassword(r.Context(), se.UserID, newHash, se.IDHash); err != nil {
		h.fail(w, r, err)
		return
	}
	if !h.audited(w, r, se, audit.PasswordChange, "user", se.UserID.String(), nil) {
		return
	}
	h.renderTeam(w, r, se, http.StatusOK, teamData{Message: "Password changed. Your other sessions were signed out."})
}

// removeMember lets an owner take a member out of the team.
func (h *Handler) removeMember(w http.ResponseWriter, r *http.Request, se *store.Session) {
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
	revoked, err := h.store.Accounts.RemoveMember(r.Context(), se.TeamID, id, audit.Entry{ActorType: audit.ActorUser,
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
func (h *Handler) switchTeam(w http.ResponseWriter, r *http.Request, se *store.Session) {
	id, err := uuid.Parse(r.PostFormValue("team"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch err := h.store.Accounts.SetSessionTeam(r.Context(), se.IDHash, id); {
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
