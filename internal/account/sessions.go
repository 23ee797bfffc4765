package account

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// Sessions holds the dashboard's sessions and the users' second factor.
type Sessions struct{ st *store.Store }

const (
	// SessionLifetime is how long a signed-in session lives at most.
	SessionLifetime = 14 * 24 * time.Hour
	// PendingLifetime is how long a session that passed the password waits
	// for its second factor.
	PendingLifetime = 10 * time.Minute
)

// Use reads the live session of a cookie's hash and marks it used;
// store.ErrNotFound when it ended (or sat idle longer than idle, when
// idle > 0).
func (s *Sessions) Use(ctx context.Context, hash []byte, now time.Time, idle time.Duration) (store.Session, error) {
	return s.st.Sessions.UseSession(ctx, hash, now, idle)
}

// SignIn is a new session of a user who passed the password or a provider.
type SignIn struct {
	UserID     uuid.UUID
	Token      string // the cookie's secret
	CSRFToken  string
	ClientAddr string
	UserAgent  string
	Now        time.Time
}

// Start creates the session of a sign-in, in the user's oldest team. The
// session waits for the second factor (PendingLifetime) when the user has
// one; otherwise it lives SessionLifetime.
func (s *Sessions) Start(ctx context.Context, in SignIn) (store.Session, error) {
	team, err := s.st.Sessions.FirstTeam(ctx, in.UserID)
	if err != nil {
		return store.Session{}, err
	}
	m, err := s.st.Sessions.UserMFA(ctx, in.UserID, team)
	if err != nil {
		return store.Session{}, err
	}
	pending := m.EnabledAt != nil
	lifetime := SessionLifetime
	if pending {
		lifetime = PendingLifetime
	}
	se := store.Session{IDHash: TokenHash(in.Token), UserID: in.UserID, TeamID: team, CSRFToken: in.CSRFToken,
		ExpiresAt: in.Now.Add(lifetime), MFAPending: pending, ClientAddr: in.ClientAddr, UserAgent: in.UserAgent,
		LastUsedAt: in.Now}
	if err := s.st.Sessions.CreateSession(ctx, se); err != nil {
		return store.Session{}, err
	}
	return se, nil
}

// FirstTeam is the user's oldest team.
func (s *Sessions) FirstTeam(ctx context.Context, userID uuid.UUID) (uuid.UUID, error) {
	return s.st.Sessions.FirstTeam(ctx, userID)
}

// Teams lists the user's teams.
func (s *Sessions) Teams(ctx context.Context, userID uuid.UUID) ([]store.Team, error) {
	return s.st.Sessions.UserTeams(ctx, userID)
}

// Role is the user's role in the team ("owner", "member").
func (s *Sessions) Role(ctx context.Context, teamID, userID uuid.UUID) (string, error) {
	return s.st.Sessions.MemberRole(ctx, teamID, userID)
}

// List lists the user's live sessions.
func (s *Sessions) List(ctx context.Context, userID uuid.UUID, now time.Time, idle time.Duration) ([]store.Session, error) {
	return s.st.Sessions.UserSessions(ctx, userID, now, idle)
}

// Revoke ends one session of the user (hash; current tells whether it is
// the caller's own) and writes the audit entry. store.ErrNotFound when the
// user has no such session.
func (s *Sessions) Revoke(ctx context.Context, userID uuid.UUID, hash []byte, current bool, by audit.Entry) error {
	e, err := audit.Succeeded(by, audit.SessionRevoke, "user", userID.String(), map[string]any{"current": current})
	if err != nil {
		return err
	}
	return s.st.Sessions.RevokeUserSession(ctx, userID, hash, e)
}

// RevokeOthers ends every session of the user but keep and writes the
// audit entry.
func (s *Sessions) RevokeOthers(ctx context.Context, userID uuid.UUID, keep []byte, by audit.Entry) error {
	_, err := s.st.Sessions.RevokeOtherSessions(ctx, userID, keep, func(n int) (audit.Entry, error) {
		return audit.Succeeded(by, audit.SessionRevoke, "user", userID.String(), map[string]any{"others": n})
	})
	return err
}

// SignOut ends the session hash of the user, or with everywhere every
// session of the user, and writes the audit entry.
func (s *Sessions) SignOut(ctx context.Context, userID uuid.UUID, hash []byte, everywhere bool, by audit.Entry) error {
	var detail map[string]any
	if everywhere {
		detail = map[string]any{"everywhere": true}
	}
	e, err := audit.Succeeded(by, audit.SignOut, "user", userID.String(), detail)
	if err != nil {
		return err
	}
	if everywhere {
		return s.st.Sessions.DeleteUserSessions(ctx, userID, e)
	}
	return s.st.Sessions.DeleteSession(ctx, hash, e)
}

// MFA reads the user's second factor and whether the team requires one.
func (s *Sessions) MFA(ctx context.Context, userID, teamID uuid.UUID) (store.MFA, error) {
	return s.st.Sessions.UserMFA(ctx, userID, teamID)
}

// StartTOTP stores the sealed secret of a second factor being set up;
// store.ErrConflict when one is on.
func (s *Sessions) StartTOTP(ctx context.Context, userID uuid.UUID, sealed []byte) error {
	return s.st.Sessions.StartTOTP(ctx, userID, sealed)
}

// EnableTOTP turns the second factor on with the hashes of its recovery
// codes and writes the audit entry.
func (s *Sessions) EnableTOTP(ctx context.Context, userID uuid.UUID, codeHashes [][]byte, by audit.Entry) error {
	e, err := audit.Succeeded(by, audit.MFAEnable, "user", userID.String(), nil)
	if err != nil {
		return err
	}
	return s.st.Sessions.EnableTOTP(ctx, userID, codeHashes, e)
}

// DisableTOTP turns the second factor off and writes the audit entry.
func (s *Sessions) DisableTOTP(ctx context.Context, userID uuid.UUID, by audit.Entry) error {
	e, err := audit.Succeeded(by, audit.MFADisable, "user", userID.String(), nil)
	if err != nil {
		return err
	}
	return s.st.Sessions.DisableTOTP(ctx, userID, e)
}

// RequireMFA sets whether the team requires a second factor of every
// member and writes the audit entry.
func (s *Sessions) RequireMFA(ctx context.Context, teamID uuid.UUID, require bool, by audit.Entry) error {
	e, err := audit.Succeeded(by, audit.SettingsUpdate, "team", teamID.String(), map[string]any{"mfa_required": require})
	if err != nil {
		return err
	}
	return s.st.Sessions.SetTeamMFARequired(ctx, teamID, require, e)
}

// CompleteMFA gives a session that passed its second factor a new id
// (newHash) and expiry; store.ErrNotFound when it expired or was passed
// meanwhile.
func (s *Sessions) CompleteMFA(ctx context.Context, hash, newHash []byte, expires time.Time) error {
	return s.st.Sessions.CompleteMFA(ctx, hash, newHash, expires)
}

// UseRecoveryCode spends an unused recovery code of the user (its hash).
func (s *Sessions) UseRecoveryCode(ctx context.Context, userID uuid.UUID, codeHash []byte) (bool, error) {
	return s.st.Sessions.UseRecoveryCode(ctx, userID, codeHash)
}

// totpOpts are the parameters of the codes: RFC 6238 with 30 s steps,
// six digits, HMAC-SHA-1 (what authenticator apps assume).
var totpOpts = totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// totpSteps returns the time steps (RFC 6238 §4.2: 30 s periods since
// the Unix epoch) whose code is code, among the current one and one on
// either side, the network delay §5.2 allows.
func totpSteps(code, secret string, now time.Time) []int64 {
	code = strings.TrimSpace(code)
	if len(code) != 6 {
		return nil
	}
	var steps []int64
	current := now.Unix() / 30
	for _, step := range []int64{current - 1, current, current + 1} {
		want, err := totp.GenerateCodeCustom(secret, time.Unix(step*30, 0), totpOpts)
		if err == nil && subtle.ConstantTimeCompare([]byte(code), []byte(want)) == 1 {
			steps = append(steps, step)
		}
	}
	return steps
}

// ErrTOTPReplayed means a right code was used before.
var ErrTOTPReplayed = errors.New("the code was already used")

// CheckTOTP accepts a code of the user's authenticator once: RFC 6238
// §5.2, a verifier must not accept an OTP again after it validated it.
// It returns ErrTOTPReplayed for a right code already used (or older than
// the last one used), false and nil for a wrong one.
func (s *Sessions) CheckTOTP(ctx context.Context, userID uuid.UUID, secret, code string, now time.Time) (bool, error) {
	steps := totpSteps(code, secret, now)
	for _, step := range steps {
		ok, err := s.st.Sessions.UseTOTPStep(ctx, userID, step)
		if err != nil || ok {
			return ok, err
		}
	}
	if len(steps) > 0 {
		return false, ErrTOTPReplayed
	}
	return false, nil
}
