package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// invite lets an owner invite an address to the team: it stores the
// invitation (replacing an earlier one for the address) and emails its link,
// or shows the link when no email can take it. Emailed invitations count
// against the team's and the address's hourly limits (MailLimits); past
// them the owner gets an error and nothing is stored. Only an emailed link
// proves the address of whoever joins with it (store.Invitation.EmailedAt).
func (h *teamHandler) invite(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, func() {
		h.renderTeam(w, r, se, http.StatusForbidden, teamData{Error: "Only team owners can invite members."})
	}) {
		return
	}
	lim := h.mailLimits()
	inv, tok, err := h.accounts.Members.Invite(r.Context(), account.InviteInput{TeamID: se.TeamID, InvitedBy: se.UserID,
		Email: r.PostFormValue("email"), Role: r.PostFormValue("role"), Emailed: h.cfg.Mailer != nil, Limits: lim,
		Now: h.now()}, by(r, se))
	var ie *invalid.Error
	switch {
	case errors.As(err, &ie):
		h.renderTeam(w, r, se, http.StatusUnprocessableEntity, teamData{Error: ie.Message})
		return
	case errors.Is(err, account.ErrAlreadyMember):
		h.renderTeam(w, r, se, http.StatusConflict, teamData{Error: normalizedEmail(r) + " is already a member of the team."})
		return
	case errors.Is(err, store.ErrTeamMailLimit):
		h.logger.Warn("invitation refused: the team's hourly invitation limit is reached", "team_id", se.TeamID)
		h.renderTeam(w, r, se, http.StatusTooManyRequests, teamData{Error: fmt.Sprintf("This team has sent %d invitation "+
			"emails in the last hour, the most it may. Try again later.", lim.PerTeam)})
		return
	case errors.Is(err, store.ErrAddressMailLimit):
		h.logger.Warn("invitation refused: the address's hourly email limit is reached", "team_id", se.TeamID)
		h.renderTeam(w, r, se, http.StatusTooManyRequests, teamData{Error: normalizedEmail(r) + " has been sent too many emails " +
			"by this server in the last hour. Try again later."})
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	email, role := inv.Email, inv.Role
	link := h.link("/dashboard/invite/" + tok)
	d := teamData{Message: "Invitation sent to " + email + "."}
	if h.cfg.Mailer == nil {
		d = teamData{InviteLink: link, Message: "Email is not set up on this server (POSTHASTE_SYSTEM_FROM), so no invitation " +
			"was sent. Send " + email + " this link yourself: it works once, for 7 days."}
	} else if err := h.cfg.Mailer.SendMail(r.Context(), Mail{To: email, Subject: "Join " + se.TeamName + " on Posthaste",
		Text: invitationText(se.UserEmail, se.TeamName, role, link, inv.ExpiresAt)}); err != nil {
		h.logger.Error("sending an invitation", "team_id", se.TeamID, "err", err)
		d = teamData{InviteLink: link, Error: "The invitation email could not be sent. Send " + email +
			" this link yourself: it works once, for 7 days."}
	} else if err := h.accounts.Members.MarkInvitationEmailed(r.Context(), tok); err != nil {
		// The link still works; joining with it just does not prove the
		// address.
		h.logger.Error("recording that an invitation was emailed", "team_id", se.TeamID, "err", err)
	}
	h.logger.Info("member invited", "team_id", se.TeamID)
	h.renderTeam(w, r, se, http.StatusCreated, d)
}

// normalizedEmail is the address of an invitation form as the accounts
// service reads it.
func normalizedEmail(r *http.Request) string {
	return strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
}

func invitationText(inviter, team, role, link string, expires time.Time) string {
	return fmt.Sprintf("%s invited you to join the team %q on Posthaste as %s.\n\n"+
		"Accept the invitation:\n%s\n\n"+
		"The link works once and expires on %s. If you did not expect this invitation, ignore this email.\n",
		inviter, team, map[string]string{"owner": "an owner", "member": "a member"}[role], link, fmtTime(expires))
}

// revokeInvitation lets an owner withdraw an invitation of the team.
func (h *teamHandler) revokeInvitation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, func() {
		h.renderTeam(w, r, se, http.StatusForbidden, teamData{Error: "Only team owners can revoke invitations."})
	}) {
		return
	}
	if _, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (struct{}, error) {
		return struct{}{}, h.accounts.Members.RevokeInvitation(r.Context(), se.TeamID, id, by(r, se))
	}); ok {
		http.Redirect(w, r, "/dashboard/team", http.StatusSeeOther)
	}
}

// What the page of an invitation link shows.
const (
	inviteInvalid = "invalid" // unknown, used, revoked or expired
	inviteNewUser = "new"     // no user has the address: choose a password
	inviteSignIn  = "signin"  // the user exists: sign in first
	inviteAccept  = "accept"  // signed in as the invited user
	inviteOther   = "other"   // signed in as someone else
)

type inviteData struct {
	State      string
	Invitation store.Invitation
	Token      string
	SignedInAs string
	SignInURL  string
	Name       string
	Error      string
}

// invitationPage shows an invitation link: a form to join as a new user,
// or, when the address has a user, a way to sign in and accept.
func (h *teamHandler) invitationPage(w http.ResponseWriter, r *http.Request) {
	if d, ok := h.liveInvitation(w, r); ok {
		h.showInvitation(w, r, http.StatusOK, d)
	}
}

// liveInvitation reads the invitation of the link's token. When it is not
// live it answers (see invalidInvitation) and returns false.
func (h *teamHandler) liveInvitation(w http.ResponseWriter, r *http.Request) (inviteData, bool) {
	tok := r.PathValue("token")
	inv, err := h.accounts.Members.Invitation(r.Context(), tok)
	if err != nil {
		h.invalidInvitation(w, r, err)
		return inviteData{}, false
	}
	return inviteData{Invitation: inv, Token: tok}, true
}

// invalidInvitation answers a link that does not lead to a live invitation
// with the same page whatever the reason.
func (h *teamHandler) invalidInvitation(w http.ResponseWriter, r *http.Request, err error) {
	if !errors.Is(err, store.ErrNotFound) {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusNotFound, "invite", view{Title: "Invitation", Data: inviteData{State: inviteInvalid}})
}

func (h *teamHandler) showInvitation(w http.ResponseWriter, r *http.Request, status int, d inviteData) {
	u, err := h.accounts.Members.UserByEmail(r.Context(), d.Invitation.Email)
	if errors.Is(err, store.ErrNotFound) {
		d.State = inviteNewUser
		h.render(w, status, "invite", view{Title: "Join " + d.Invitation.TeamName, CSRF: h.formToken(w), Data: d})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	se, err := h.cookieSession(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := view{Title: "Join " + d.Invitation.TeamName}
	switch {
	case se == nil || se.MFAPending:
		d.State = inviteSignIn
		d.SignInURL = "/dashboard/login?next=" + url.QueryEscape("/dashboard/invite/"+d.Token)
	case se.UserID != u.ID:
		d.State, d.SignedInAs, v.Session, v.CSRF = inviteOther, se.UserEmail, se, se.CSRFToken
	default:
		d.State, v.Session, v.CSRF = inviteAccept, se, se.CSRFToken
	}
	v.Data = d
	h.render(w, status, "invite", v)
}

// joinAsNewUser creates the invited address's user with the chosen
// password as a member of the team, spends the invitation and signs in.
func (h *teamHandler) joinAsNewUser(w http.ResponseWriter, r *http.Request) {
	if !h.anonymousAttempt(w, r) {
		return
	}
	d, ok := h.liveInvitation(w, r)
	if !ok {
		return
	}
	d.Name = strings.TrimSpace(r.PostFormValue("name"))
	if !formTokenOK(r) {
		d.Error = formExpired
		h.showInvitation(w, r, http.StatusForbidden, d)
		return
	}
	var ie *invalid.Error
	if err := account.CheckName(d.Name); errors.As(err, &ie) {
		d.Error = ie.Message
		h.showInvitation(w, r, http.StatusUnprocessableEntity, d)
		return
	}
	hash, ok := h.newPassword(w, r, r.PostFormValue("password"), r.PostFormValue("confirm"), func(problem string) {
		d.Error = problem
		h.showInvitation(w, r, http.StatusUnprocessableEntity, d)
	})
	if !ok {
		return
	}
	u, inv, err := h.accounts.Members.JoinAsNewUser(r.Context(), d.Token, d.Name, hash, client(r))
	if errors.Is(err, store.ErrConflict) {
		// The address got a user meanwhile: that user signs in to accept.
		h.showInvitation(w, r, http.StatusConflict, d)
		return
	}
	if err != nil {
		h.invalidInvitation(w, r, err)
		return
	}
	h.logger.Info("invitation accepted by a new user", "team_id", inv.TeamID)
	h.startSession(w, r, u, "/dashboard/team")
}

// acceptInvitation makes the signed-in user, who has the invited address,
// a member of the team, spends the invitation and switches the session to
// that team.
func (h *teamHandler) acceptInvitation(w http.ResponseWriter, r *http.Request, se *store.Session) {
	inv, err := h.accounts.Members.AcceptInvitation(r.Context(), r.PathValue("token"), se.UserID, se.IDHash, client(r))
	if err != nil {
		h.invalidInvitation(w, r, err)
		return
	}
	h.logger.Info("invitation accepted", "team_id", inv.TeamID)
	http.Redirect(w, r, "/dashboard/team", http.StatusSeeOther)
}

// addressData tells a user whether their address is proven and, when it
// is not, how they can prove it (Team page).
type addressData struct {
	Email      string
	Unproven   bool
	ByEmail    bool           // a mailer can send a confirmation link
	ByProvider []providerLink // configured OAuth providers
}

func (h *teamHandler) addressState(ctx context.Context, userID uuid.UUID) (addressData, error) {
	u, err := h.accounts.Members.User(ctx, userID)
	if err != nil {
		return addressData{}, fmt.Errorf("reading the user: %w", err)
	}
	d := addressData{Email: u.Email, Unproven: u.EmailVerifiedAt == nil}
	if d.Unproven {
		d.ByEmail, d.ByProvider = h.cfg.Mailer != nil, h.signInHandler.providersConfirming()
	}
	return d, nil
}
