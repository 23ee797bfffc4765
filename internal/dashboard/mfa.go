package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"image/png"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/pquerna/otp/totp"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/store"
)

// recoveryCodes is how many one-time codes a user gets.
const recoveryCodes = 10

// errTOTPReplayed means a right code was used before.
var errTOTPReplayed = account.ErrTOTPReplayed

// checkTOTP accepts a code of the user's authenticator once
// (account.Sessions.CheckTOTP).
func (h *teamHandler) checkTOTP(ctx context.Context, userID uuid.UUID, secret, code string) (bool, error) {
	return h.accounts.Sessions.CheckTOTP(ctx, userID, secret, code, h.now())
}

func (h *teamHandler) secret(se *store.Session, m store.MFA) (string, error) {
	if h.cfg.Keys == nil || m.SealedSecret == nil {
		return "", errors.New("no second factor is set up")
	}
	b, err := h.cfg.Keys.Open(m.SealedSecret, se.UserID[:])
	if err != nil {
		return "", fmt.Errorf("opening the totp secret: %w", err)
	}
	return string(b), nil
}

type mfaData struct {
	Error string
	Next  string
}

func (h *teamHandler) mfaPage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.render(w, http.StatusOK, "mfa", view{Title: "Two-factor authentication", Session: nil, CSRF: se.CSRFToken,
		Data: mfaData{Next: safeNext(r.URL.Query().Get("next"))}})
}

// mfa checks the second factor of a session that passed the password: a
// code from the authenticator app, accepted once, or an unused recovery
// code. Each attempt is charged to the user and to the client address
// before it is checked, so parallel guesses count as they start. Passing
// gives the session a new id and its full lifetime.
func (h *teamHandler) mfa(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d := mfaData{Next: safeNext(r.PostFormValue("next"))}
	refuse := func(status int, msg string) {
		d.Error = msg
		h.render(w, status, "mfa", view{Title: "Two-factor authentication", CSRF: se.CSRFToken, Data: d})
	}
	now := h.now()
	user := throttleKey{Name: "mfa|" + se.UserID.String(), Limit: pairLimit}
	address := throttleKey{Name: "addr|" + clientIP(r), Limit: addressLimit}
	if ok, wait := h.throttle.Take(now, user, address); !ok {
		retryAfter(w, wait)
		refuse(http.StatusTooManyRequests, "Too many wrong codes. Wait a few minutes and try again.")
		return
	}
	ok, err := h.secondFactor(r, se)
	if errors.Is(err, errTOTPReplayed) {
		refuse(http.StatusUnauthorized, "That code was already used. Enter the next one your app shows.")
		return
	}
	if err != nil {
		h.throttle.Refund(h.now(), user, address)
		h.fail(w, r, err)
		return
	}
	if !ok {
		h.signInFailed(r, se.UserID, map[string]any{"factor": "second"})
		refuse(http.StatusUnauthorized, "That code is not valid.")
		return
	}
	h.throttle.Reset(user.Name)
	h.throttle.Refund(h.now(), address)
	tok := randomToken()
	if err := h.accounts.Sessions.CompleteMFA(r.Context(), se.IDHash, tokenHash(tok), h.now().Add(sessionLifetime)); errors.Is(err, store.ErrNotFound) {
		// Expired, or passed by a parallel request meanwhile.
		h.toLogin(w, r)
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	}
	h.recordSignIn(r, se.UserID, &se.TeamID, true, map[string]any{"factor": "second"})
	http.SetCookie(w, h.cookie(sessionCookie, tok, sessionLifetime))
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

// secondFactor checks the posted code: the authenticator's, or else a
// recovery code (longer), which it spends.
func (h *teamHandler) secondFactor(r *http.Request, se *store.Session) (bool, error) {
	m, err := h.accounts.Sessions.MFA(r.Context(), se.UserID, se.TeamID)
	if err != nil {
		return false, err
	}
	secret, err := h.secret(se, m)
	if err != nil {
		return false, err
	}
	code := strings.TrimSpace(r.PostFormValue("code"))
	if len(code) > 6 {
		return h.accounts.Sessions.UseRecoveryCode(r.Context(), se.UserID, tokenHash(normalizeRecovery(code)))
	}
	return h.checkTOTP(r.Context(), se.UserID, secret, code)
}

func normalizeRecovery(code string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(code), " ", ""))
}

type accountData struct {
	Enabled       bool
	TeamRequires  bool
	Owner         bool
	Available     bool         // a master key is configured, so secrets can be sealed
	Secret        string       // during setup
	QR            template.URL // data URL of the QR code (a PNG we made), during setup
	RecoveryCodes []string
	Teams         []store.Team // the user's teams, to switch between
	Sessions      []sessionRow // the user's live sessions
	Message       string
	Error         string
}

func (h *teamHandler) account(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderAccount(w, r, se, http.StatusOK, accountData{})
}

func (h *teamHandler) renderAccount(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d accountData) {
	m, err := h.accounts.Sessions.MFA(r.Context(), se.UserID, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	role, err := h.accounts.Sessions.Role(r.Context(), se.TeamID, se.UserID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Enabled, d.TeamRequires, d.Owner, d.Available = m.EnabledAt != nil, m.TeamRequires, role == "owner", h.cfg.Keys != nil
	if d.Teams, err = h.accounts.Sessions.Teams(r.Context(), se.UserID); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Sessions, err = h.userSessions(r, se); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.TeamRequires && !d.Enabled && d.Message == "" && d.Secret == "" {
		d.Message = "Your team requires two-factor authentication. Set it up to continue."
	}
	h.render(w, status, "account", view{Title: "Account", Nav: "account", Session: se, CSRF: se.CSRFToken, Data: d})
}

func (h *teamHandler) startMFA(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if h.cfg.Keys == nil {
		h.renderAccount(w, r, se, http.StatusServiceUnavailable, accountData{
			Error: "Two-factor authentication needs POSTHASTE_MASTER_KEY on this server."})
		return
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "Posthaste", AccountName: se.UserEmail})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sealed, err := h.cfg.Keys.Seal([]byte(key.Secret()), se.UserID[:])
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.accounts.Sessions.StartTOTP(r.Context(), se.UserID, sealed); errors.Is(err, store.ErrConflict) {
		h.renderAccount(w, r, se, http.StatusConflict, accountData{Error: "Two-factor authentication is already on."})
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	}
	img, err := key.Image(200, 200)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderAccount(w, r, se, http.StatusOK, accountData{Secret: key.Secret(),
		QR: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()))})
}

func (h *teamHandler) confirmMFA(w http.ResponseWriter, r *http.Request, se *store.Session) {
	m, err := h.accounts.Sessions.MFA(r.Context(), se.UserID, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if m.EnabledAt != nil {
		h.renderAccount(w, r, se, http.StatusConflict, accountData{Error: "Two-factor authentication is already on."})
		return
	}
	secret, err := h.secret(se, m)
	if err != nil {
		h.renderAccount(w, r, se, http.StatusUnprocessableEntity, accountData{Error: "Start the setup first."})
		return
	}
	if ok, err := h.checkTOTP(r.Context(), se.UserID, secret, r.PostFormValue("code")); errors.Is(err, errTOTPReplayed) {
		h.renderAccount(w, r, se, http.StatusUnprocessableEntity, accountData{
			Error: "That code was already used. Enter the next one your app shows."})
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	} else if !ok {
		h.renderAccount(w, r, se, http.StatusUnprocessableEntity, accountData{
			Error: "That code is not valid. Check the time on your device and try again."})
		return
	}
	codes := make([]string, recoveryCodes)
	hashes := make([][]byte, recoveryCodes)
	for i := range codes {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		c := strings.ToLower(base64.RawURLEncoding.EncodeToString(b)) // 8 characters
		c = strings.NewReplacer("-", "x", "_", "y").Replace(c)
		codes[i] = c[:4] + "-" + c[4:]
		hashes[i] = tokenHash(normalizeRecovery(codes[i]))
	}
	if err := h.accounts.Sessions.EnableTOTP(r.Context(), se.UserID, hashes, by(r, se)); err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderAccount(w, r, se, http.StatusOK, accountData{RecoveryCodes: codes,
		Message: "Two-factor authentication is on. Keep these recovery codes somewhere safe: each works once, and they are shown only now."})
}

func (h *teamHandler) disableMFA(w http.ResponseWriter, r *http.Request, se *store.Session) {
	m, err := h.accounts.Sessions.MFA(r.Context(), se.UserID, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if m.TeamRequires {
		h.renderAccount(w, r, se, http.StatusForbidden, accountData{Error: "Your team requires two-factor authentication."})
		return
	}
	secret, err := h.secret(se, m)
	if err != nil {
		h.renderAccount(w, r, se, http.StatusUnprocessableEntity, accountData{Error: "Enter a current code to turn it off."})
		return
	}
	if ok, err := h.checkTOTP(r.Context(), se.UserID, secret, r.PostFormValue("code")); err != nil && !errors.Is(err, errTOTPReplayed) {
		h.fail(w, r, err)
		return
	} else if !ok {
		h.renderAccount(w, r, se, http.StatusUnprocessableEntity, accountData{Error: "Enter a current code to turn it off."})
		return
	}
	if err := h.accounts.Sessions.DisableTOTP(r.Context(), se.UserID, by(r, se)); err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderAccount(w, r, se, http.StatusOK, accountData{Message: "Two-factor authentication is off."})
}

// teamMFA lets an owner require a second factor of every member.
func (h *teamHandler) teamMFA(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, func() {
		h.renderAccount(w, r, se, http.StatusForbidden, accountData{Error: "Only team owners can change this."})
	}) {
		return
	}
	require := r.PostFormValue("require") == "on"
	if err := h.accounts.Sessions.RequireMFA(r.Context(), se.TeamID, require, by(r, se)); err != nil {
		h.fail(w, r, err)
		return
	}
	msg := "Members may sign in without a second factor."
	if require {
		msg = "Every member now needs two-factor authentication."
	}
	h.renderAccount(w, r, se, http.StatusOK, accountData{Message: msg})
}
