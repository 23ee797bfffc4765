package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

const (
	// resetLifetime is how long a password-reset link works.
	resetLifetime = time.Hour
	// resetSendTimeout bounds the sending of one reset email.
	resetSendTimeout = 30 * time.Second
)

type forgotData struct {
	Email       string
	Sent        bool
	Unavailable bool // no mailer: links cannot be sent
	Error       string
}

func (h *Handler) renderForgot(w http.ResponseWriter, status int, d forgotData) {
	d.Unavailable = h.cfg.Mailer == nil
	h.render(w, status, "forgot", view{Title: "Reset your password", CSRF: h.formToken(w), Data: d})
}

func (h *Handler) forgotPage(w http.ResponseWriter, _ *http.Request) {
	h.renderForgot(w, http.StatusOK, forgotData{})
}

// forgot emails a password-reset link to the address if a user has it. The
// answer is the same either way, and the email is sent after answering, so
// neither the text nor the time tells which addresses have accounts. Each
// address and each client address may ask a few times per throttle window,
// and past the address's hourly email limit (MailLimits) nothing is sent,
// behind the same answer.
func (h *Handler) forgot(w http.ResponseWriter, r *http.Request) {
	d := forgotData{Email: strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))}
	if h.cfg.Mailer == nil {
		h.renderForgot(w, http.StatusServiceUnavailable, d)
		return
	}
	if !formTokenOK(r) {
		d.Error = formExpired
		h.renderForgot(w, http.StatusForbidden, d)
		return
	}
	if d.Email == "" {
		d.Error = "Enter the email address you sign in with."
		h.renderForgot(w, http.StatusUnprocessableEntity, d)
		return
	}
	now := h.now()
	keys := []string{"reset|" + d.Email, "reset-ip|" + clientIP(r)}
	for _, k := range keys {
		if !h.throttle.Allow(throttleKey{Name: k, Limit: pairLimit}, now) {
			d.Error = "Too many reset requests. Wait a few minutes and try again."
			h.renderForgot(w, http.StatusTooManyRequests, d)
			return
		}
	}
	for _, k := range keys {
		h.throttle.Fail(throttleKey{Name: k, Limit: pairLimit}, now)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), resetSendTimeout)
	h.background.Add(1)
	go func() {
		defer h.background.Done()
		defer cancel()
		if err := h.sendReset(ctx, d.Email); err != nil {
			h.logger.Error("sending a password-reset link", "err", err)
		}
	}()
	d.Sent = true
	h.renderForgot(w, http.StatusOK, d)
}

// sendReset stores a new reset token for the user with this address, if
// any (the user's older link stops working), and emails its link. Every
// request counts against the address's hourly email limit, whether or not
// a user has the address, so that the limit tells nothing about accounts;
// past it nothing is sent.
func (h *Handler) sendReset(ctx context.Context, email string) error {
	err := h.store.Emails.ReserveSystemMail(ctx, store.SystemMail{Kind: store.SystemMailPasswordReset, Email: email},
		h.mailLimits(), h.now())
	if errors.Is(err, store.ErrAddressMailLimit) {
		h.logger.Warn("password-reset link not sent: the address's hourly email limit is reached")
		return nil
	}
	if err != nil {
		return fmt.Errorf("counting system emails: %w", err)
	}
	u, err := h.store.Accounts.UserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding the user: %w", err)
	}
	if err := h.mailReset(ctx, u, false); err != nil {
		return err
	}
	h.logger.Info("password-reset link sent")
	return nil
}

// mailReset stores a new reset token for the user (their older link stops
// working) and emails its link: to reset the password or, with confirm,
// to confirm an unproven address by choosing a password.
func (h *Handler) mailReset(ctx context.Context, u store.User, confirm bool) error {
	tok := randomToken()
	expires := h.now().Add(resetLifetime)
	if err := h.store.Accounts.RequestPasswordReset(ctx, u.ID, tokenHash(tok), expires); err != nil {
		return fmt.Errorf("storing the reset token: %w", err)
	}
	subject, intro := "Reset your Posthaste password", "Someone asked to reset the password of your Posthaste account %s."
	if confirm {
		subject, intro = "Confirm your address on Posthaste", "Someone asked to confirm the address of the Posthaste account %s."
	}
	effect := "Setting a new password signs you out everywhere; two-factor authentication stays on. " +
		"If you did not ask for this, ignore this email: your password stays as it is."
	if u.EmailVerifiedAt == nil {
		effect = "The account was set up through an invitation link that was not emailed to this address, and whoever " +
			"set it up may not have been you: setting a new password confirms the address, signs every session out and " +
			"turns two-factor authentication off. If you do not want the account, ignore this email."
	}
	text := fmt.Sprintf(intro+"\n\nChoose a new password:\n%s\n\nThe link works once and expires at %s. %s\n",
		u.Email, h.link("/dashboard/reset/"+tok), fmtTime(expires), effect)
	if err := h.cfg.Mailer.SendMail(ctx, Mail{To: u.Email, Subject: subject, Text: text}); err != nil {
		return fmt.Errorf("sending the reset link: %w", err)
	}
	return nil
}

// confirmAddress emails the signed-in user, whose address is unproven, a
// link that confirms it by choosing a password (a reset link: using it
// proves the address, store.ResetPassword). It counts against the
// address's hourly email limit; the user learns when it is reached, since
// the address is their own.
func (h *Handler) confirmAddress(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if h.cfg.Mailer == nil {
		h.renderTeam(w, r, se, http.StatusServiceUnavailable, teamData{Error: "Email is not set up on this server, " +
			"so no confirmation link can be sent."})
		return
	}
	u, err := h.store.Accounts.UserByID(r.Context(), se.UserID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if u.EmailVerifiedAt != nil {
		h.renderTeam(w, r, se, http.StatusOK, teamData{Message: "Your address is already confirmed."})
		return
	}
	err = h.store.Emails.ReserveSystemMail(r.Context(), store.SystemMail{Kind: store.SystemMailPasswordReset, Email: u.Email},
		h.mailLimits(), h.now())
	if errors.Is(err, store.ErrAddressMailLimit) {
		h.renderTeam(w, r, se, http.StatusTooManyRequests, teamData{Error: "Too many emails went to your address in the " +
			"last hour. Try again later."})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.mailReset(r.Context(), u, true); err != nil {
		h.logger.Error("sending an address confirmation link", "err", err)
		h.renderTeam(w, r, se, http.StatusBadGateway, teamData{Error: "The confirmation email could not be sent. Try again later."})
		return
	}
	h.logger.Info("address confirmation link sent")
	h.renderTeam(w, r, se, http.StatusOK, teamData{Message: "We emailed " + u.Email + " a link. Open it and choose a " +
		"password to confirm your address; it works once, within an hour."})
}

type resetData struct {
	Invalid bool // the link is unknown, used, replaced or expired
	Done    bool
	// ProvedAddress: the reset confirmed an unproven address, and turned
	// two-factor authentication off (store.PasswordReset).
	ProvedAddress bool
	Token         string
	Error         string
}

func (h *Handler) renderReset(w http.ResponseWriter, status int, d resetData) {
	v := view{Title: "Choose a new password", Data: d}
	if !d.Invalid && !d.Done {
		v.CSRF = h.formToken(w)
	}
	h.render(w, status, "reset", v)
}

// resetLink checks the token of a reset link; when it is not live it
// answers (the same page whatever the reason) and returns false.
func (h *Handler) resetLink(w http.ResponseWriter, r *http.Request) bool {
	_, err := h.store.Accounts.PasswordResetUser(r.Context(), tokenHash(r.PathValue("token")))
	if errors.Is(err, store.ErrNotFound) {
		h.renderReset(w, http.StatusNotFound, resetData{Invalid: true})
		return false
	}
	if err != nil {
		h.fail(w, r, err)
		return false
	}
	return true
}

func (h *Handler) resetPage(w http.ResponseWriter, r *http.Request) {
	if h.resetLink(w, r) {
		h.renderReset(w, http.StatusOK, resetData{Token: r.PathValue("token")})
	}
}

// reset sets a new password with a reset link, spends the link and ends
// every session of the user, who then signs in as usual (with the second
// factor, when they have one). The link was emailed, so it proves the
// address; an address proven only now also loses the second factor that
// whoever set the account up may have added.
func (h *Handler) reset(w http.ResponseWriter, r *http.Request) {
	if !h.anonymousAttempt(w, r) || !h.resetLink(w, r) {
		return
	}
	tok := r.PathValue("token")
	if !formTokenOK(r) {
		h.renderReset(w, http.StatusForbidden, resetData{Token: tok, Error: formExpired})
		return
	}
	hash, ok := h.newPassword(w, r, r.PostFormValue("password"), r.PostFormValue("confirm"), func(problem string) {
		h.renderReset(w, http.StatusUnprocessableEntity, resetData{Token: tok, Error: problem})
	})
	if !ok {
		return
	}
	pr, err := h.store.Accounts.ResetPassword(r.Context(), tokenHash(tok), hash)
	if errors.Is(err, store.ErrNotFound) {
		h.renderReset(w, http.StatusNotFound, resetData{Invalid: true})
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.Info("password reset", "proved_address", pr.ProvedAddress)
	if err := h.record(r, audit.Entry{ActorType: audit.ActorUser, ActorID: &pr.UserID, Action: audit.PasswordReset,
		TargetType: "user", TargetID: pr.UserID.String(), Outcome: audit.Success},
		map[string]any{"proved_address": pr.ProvedAddress}); err != nil {
		h.fail(w, r, err)
		return
	}
	http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
	h.renderReset(w, http.StatusOK, resetData{Done: true, ProvedAddress: pr.ProvedAddress})
}
