package account

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// Members holds teams, their members and invitations, and users: their
// passwords, password resets and proven addresses.
type Members struct{ st *store.Store }

// InvitationLifetime is how long an invitation link works.
const InvitationLifetime = 7 * 24 * time.Hour

// ResetLifetime is how long a password-reset link works.
const ResetLifetime = time.Hour

// ErrAlreadyMember: the invited address is already a member of the team.
var ErrAlreadyMember = errors.New("already a member of the team")

// Members lists the team's members.
func (m *Members) Members(ctx context.Context, teamID uuid.UUID) ([]store.Member, error) {
	return m.st.Accounts.Members(ctx, teamID)
}

// Invitations lists the team's invitations.
func (m *Members) Invitations(ctx context.Context, teamID uuid.UUID) ([]store.Invitation, error) {
	return m.st.Accounts.Invitations(ctx, teamID)
}

// User reads a user.
func (m *Members) User(ctx context.Context, id uuid.UUID) (store.User, error) {
	return m.st.Accounts.UserByID(ctx, id)
}

// UserByEmail reads the user with an address; store.ErrNotFound when none.
func (m *Members) UserByEmail(ctx context.Context, email string) (store.User, error) {
	return m.st.Accounts.UserByEmail(ctx, email)
}

// PasswordHash reads a user's password hash; "" when the user signs in
// only through a provider.
func (m *Members) PasswordHash(ctx context.Context, userID uuid.UUID) (string, error) {
	return m.st.Accounts.UserPasswordHash(ctx, userID)
}

// SetPassword stores a user's new password hash, ends their sessions but
// keep, and writes the audit entry.
func (m *Members) SetPassword(ctx context.Context, userID uuid.UUID, hash string, keep []byte, by audit.Entry) error {
	e, err := audit.Succeeded(by, audit.PasswordChange, "user", userID.String(), nil)
	if err != nil {
		return err
	}
	return m.st.Accounts.SetPassword(ctx, userID, hash, keep, e)
}

// RemoveMember takes a user out of the team, with their sessions of it and
// the keys they made, and writes the audit entries in that transaction
// (store.Accounts.RemoveMember). It returns the revoked keys, for the
// caller to drop from its key cache.
func (m *Members) RemoveMember(ctx context.Context, teamID, userID uuid.UUID, by audit.Entry) ([]store.RevokedKey, error) {
	return m.st.Accounts.RemoveMember(ctx, teamID, userID, by)
}

// SwitchTeam moves a session to another team of its user's;
// store.ErrNotFound when the user is not a member of it.
func (m *Members) SwitchTeam(ctx context.Context, sessionHash []byte, teamID uuid.UUID) error {
	return m.st.Accounts.SetSessionTeam(ctx, sessionHash, teamID)
}

// InviteInput is an invitation to a team.
type InviteInput struct {
	TeamID    uuid.UUID
	InvitedBy uuid.UUID
	Email     string
	Role      string // "owner"; anything else invites a member
	// Emailed reserves the email of the link against Limits first
	// (store.ErrTeamMailLimit, store.ErrAddressMailLimit past them).
	Emailed bool
	Limits  store.SystemMailLimits
	Now     time.Time
}

// Invite checks in and stores the invitation (replacing an earlier one for
// the address), writing its audit entry; it returns the invitation and the
// secret token of its link. Errors: *invalid.Error for a bad address,
// ErrAlreadyMember, the mail limits' errors.
func (m *Members) Invite(ctx context.Context, in InviteInput, by audit.Entry) (store.Invitation, string, error) {
	email := strings.ToLower(strings.TrimSpace(in.Email))
	role := in.Role
	if role != "owner" {
		role = "member"
	}
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email || len(email) > 254 {
		return store.Invitation{}, "", invalid.Errorf("email", "Enter the email address to invite.")
	}
	members, err := m.st.Accounts.TeamMembers(ctx, in.TeamID, []string{email})
	if err != nil {
		return store.Invitation{}, "", err
	}
	if members[email] {
		return store.Invitation{}, "", ErrAlreadyMember
	}
	if in.Emailed {
		if err := m.st.Emails.ReserveSystemMail(ctx, store.SystemMail{Kind: store.SystemMailInvitation, TeamID: in.TeamID,
			Email: email}, in.Limits, in.Now); err != nil {
			return store.Invitation{}, "", err
		}
	}
	tok := RandomToken()
	inv, err := m.st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: in.TeamID, Email: email, Role: role,
		InvitedBy: &in.InvitedBy, ExpiresAt: in.Now.Add(InvitationLifetime)}, TokenHash(tok),
		func(inv store.Invitation) (audit.Entry, error) {
			return audit.Succeeded(by, audit.InviteCreate, "invitation", inv.ID.String(), map[string]any{"role": role})
		})
	if err != nil {
		return store.Invitation{}, "", err
	}
	return inv, tok, nil
}

// MarkInvitationEmailed records that the link of token was emailed to the
// address, so joining with it proves the address.
func (m *Members) MarkInvitationEmailed(ctx context.Context, token string) error {
	return m.st.Accounts.MarkInvitationEmailed(ctx, TokenHash(token))
}

// RevokeInvitation withdraws an invitation of the team and writes the
// audit entry; store.ErrNotFound when there is none.
func (m *Members) RevokeInvitation(ctx context.Context, teamID, id uuid.UUID, by audit.Entry) error {
	e, err := audit.Succeeded(by, audit.InviteRevoke, "invitation", id.String(), nil)
	if err != nil {
		return err
	}
	return m.st.Accounts.RevokeInvitation(ctx, teamID, id, e)
}

// Invitation reads the live invitation of a link's token;
// store.ErrNotFound when it is unknown, used, revoked or expired.
func (m *Members) Invitation(ctx context.Context, token string) (store.Invitation, error) {
	return m.st.Accounts.InvitationByToken(ctx, TokenHash(token))
}

// CheckName checks the name of a user joining by invitation.
func CheckName(name string) error {
	if utf8.RuneCountInString(name) > 100 {
		return invalid.Errorf("name", "Keep the name under 100 characters.")
	}
	return nil
}

// JoinAsNewUser creates the invited address's user, named name, with the
// password hash (checked by the caller), makes them a member of the team,
// spends the invitation and writes the audit entry (by gives the client;
// the actor is the new user). store.ErrConflict when the address got a
// user meanwhile; store.ErrNotFound when the invitation is not live.
func (m *Members) JoinAsNewUser(ctx context.Context, token, name, passwordHash string, by audit.Entry) (store.User,
	store.Invitation, error) {
	if err := CheckName(name); err != nil {
		return store.User{}, store.Invitation{}, err
	}
	u := store.User{ID: uuid.New(), Name: name, PasswordHash: passwordHash}
	inv, err := m.st.Accounts.AcceptInvitationAsNewUser(ctx, TokenHash(token), u,
		func(inv store.Invitation) (audit.Entry, error) {
			by.TeamID, by.ActorType, by.ActorID = &inv.TeamID, audit.ActorUser, &u.ID
			return audit.Succeeded(by, audit.InviteAccept, "invitation", inv.ID.String(), map[string]any{"new_user": true})
		})
	if err != nil {
		return store.User{}, store.Invitation{}, err
	}
	u.Email = inv.Email
	return u, inv, nil
}

// AcceptInvitation makes the user of the session, who has the invited
// address, a member of the team, spends the invitation, switches the
// session to the team and writes the audit entry. store.ErrNotFound when
// the invitation is not live or not for the user's address; the errors of
// the steps after it never match store.ErrNotFound.
func (m *Members) AcceptInvitation(ctx context.Context, token string, userID uuid.UUID, sessionHash []byte,
	by audit.Entry) (store.Invitation, error) {
	inv, err := m.st.Accounts.AcceptInvitation(ctx, TokenHash(token), userID,
		func(inv store.Invitation) (audit.Entry, error) {
			by.TeamID, by.ActorType, by.ActorID = &inv.TeamID, audit.ActorUser, &userID
			return audit.Succeeded(by, audit.InviteAccept, "invitation", inv.ID.String(), nil)
		})
	if err != nil {
		return store.Invitation{}, err
	}
	if err := m.st.Accounts.SetSessionTeam(ctx, sessionHash, inv.TeamID); err != nil {
		return store.Invitation{}, fmt.Errorf("switching the session to the team: %v", err)
	}
	return inv, nil
}

// ReserveResetMail reserves, against lim, the email of a password-reset
// (or address confirmation) link to the address, before it is sent;
// store.ErrAddressMailLimit when the address had its share of system
// emails. Every request counts, whether or not a user has the address.
func (m *Members) ReserveResetMail(ctx context.Context, email string, lim store.SystemMailLimits, now time.Time) error {
	return m.st.Emails.ReserveSystemMail(ctx, store.SystemMail{Kind: store.SystemMailPasswordReset, Email: email}, lim, now)
}

// RequestReset stores a new password-reset token for the user (their
// older link stops working) and returns it with its expiry.
func (m *Members) RequestReset(ctx context.Context, userID uuid.UUID, now time.Time) (string, time.Time, error) {
	tok := RandomToken()
	expires := now.Add(ResetLifetime)
	if err := m.st.Accounts.RequestPasswordReset(ctx, userID, TokenHash(tok), expires); err != nil {
		return "", time.Time{}, fmt.Errorf("storing the reset token: %w", err)
	}
	return tok, expires, nil
}

// ResetLive reports the live reset token's user; store.ErrNotFound when
// the link is unknown, used, replaced or expired.
func (m *Members) ResetLive(ctx context.Context, token string) (uuid.UUID, error) {
	return m.st.Accounts.PasswordResetUser(ctx, TokenHash(token))
}

// ResetPassword spends a live reset token: it sets the password hash (the
// caller checked and hashed the password), ends every session of the user,
// proves the address (store.Accounts.ResetPassword) and writes the audit
// entry (by gives the client; the actor is the user). store.ErrNotFound
// when the link is not live.
func (m *Members) ResetPassword(ctx context.Context, token, passwordHash string, by audit.Entry) (store.PasswordReset, error) {
	return m.st.Accounts.ResetPassword(ctx, TokenHash(token), passwordHash,
		func(pr store.PasswordReset) (audit.Entry, error) {
			by.ActorType, by.ActorID = audit.ActorUser, &pr.UserID
			return audit.Succeeded(by, audit.PasswordReset, "user", pr.UserID.String(),
				map[string]any{"proved_address": pr.ProvedAddress})
		})
}

// VerifyEmail marks a user's address proven (by an identity provider).
func (m *Members) VerifyEmail(ctx context.Context, userID uuid.UUID) error {
	return m.st.Accounts.VerifyUserEmail(ctx, userID)
}

// SignUp creates a user without a password, whose address an identity
// provider verified, and a team of their own that they own.
func (m *Members) SignUp(ctx context.Context, email string, now time.Time) (store.User, uuid.UUID, error) {
	teamID, err := uuid.NewV7()
	if err != nil {
		return store.User{}, uuid.Nil, err
	}
	if err := m.st.Accounts.CreateTeam(ctx, store.Team{ID: teamID, Name: email}); err != nil {
		return store.User{}, uuid.Nil, err
	}
	u := store.User{ID: uuid.New(), Email: email, EmailVerifiedAt: &now}
	if err := m.st.Accounts.CreateUser(ctx, u); err != nil {
		return store.User{}, uuid.Nil, err
	}
	if err := m.st.Accounts.AddMember(ctx, teamID, u.ID, "owner"); err != nil {
		return store.User{}, uuid.Nil, err
	}
	return u, teamID, nil
}
