package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/store"
)

const (
	// resetSendTimeout bounds the sending of one reset email.
	resetSendTimeout = 30 * time.Second
)

type forgotData struct {
	Email       string
	Sent        bool
	Unavailable bool // no mailer: links cannot be sent
	Error       string
}

func (h *signInHandler) renderForgot(w http.ResponseWriter, status int, d forgotData) {
	d.Unavailable = h.cfg.Mailer == nil
	h.render(w, status, "forgot", view{Title: "Reset your password", CSRF: h.formToken(w), Data: d})
}

func (h *signInHandler) forgotPage(w http.ResponseWriter, _ *http.Request) {
	h.renderForgot(w, http.StatusOK, forgotData{})
}

// forgot emails a password-reset link to the address if a user has it. The
// answer is the same either way, and the email is sent after answering, so
// neither the text nor the time tells which addresses have accounts. Each
// address and each client address may ask a few times per throttle window,
// and past the address's hourly email limit (MailLimits) nothing is sent,
// behind the same answer.
func (h *signInHandler) forgot(w http.ResponseWriter, r *http.Request) {
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
func (h *signInHandler) sendReset(ctx context.Context, email string) error {
	err := h.accounts.Members.ReserveResetMail(ctx, email, h.mailLimits(), h.now())
	if errors.Is(err, store.ErrAddressMailLimit) {
		h.logger.Warn("password-reset link not sent: the address's hourly email limit is reached")
		return nil
	}
	if err != nil {
		return fmt.Errorf("counting system emails: %w", err)
	}
	u, err := h.accounts.Members.UserByEmail(ctx, email)
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
func (h *signInHandler) mailReset(ctx context.Context, u store.User, confirm bool) error {
	tok, expires, err := h.accounts.Members.RequestReset(ctx, u.ID, h.now())
	if err != nil {
		return err
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

type resetData struct {
	Invalid bool // the link is unknown, used, replaced or expired
	Done    bool
	// ProvedAddress: the reset confirmed an unproven address, and turned
	// two-factor authentication off (store.PasswordReset).
	ProvedAddress bool
	Token         string
	Error         string
}

func (h *signInHandler) renderReset(w http.ResponseWriter, status int, d resetData) {
	v := view{Title: "Choose a new password", Data: d}
	if !d.Invalid && !d.Done {
		v.CSRF = h.formToken(w)
	}
	h.render(w, status, "reset", v)
}

// resetLink checks the token of a reset link; when it is not live it
// answers (the same page whatever the reason) and returns false.
func (h *signInHandler) resetLink(w http.ResponseWriter, r *http.Request) bool {
	_, err := h.accounts.Members.ResetLive(r.Context(), r.PathValue("token"))
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

func (h *signInHandler) resetPage(w http.ResponseWriter, r *http.Request) {
	if h.resetLink(w, r) {
		h.renderReset(w, http.StatusOK, resetData{Token: r.PathValue("token")})
	}
}

// reset sets a new password with a reset link, spends the link and ends
// every session of the user, who then signs in as usual (with the second
// factor, when they have one). The link was emailed, so it proves the
// address; an address proven only now also loses the second factor that
// whoever set the account up may have added.
func (h *signInHandler) reset(w http.ResponseWriter, r *http.Request) {
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
	pr, err := h.accounts.Members.ResetPassword(r.Context(), tok, hash, client(r))
	if errors.Is(err, store.ErrNotFound) {
		h.renderReset(w, http.StatusNotFound, resetData{Invalid: true})
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.Info("password reset", "proved_address", pr.ProvedAddress)
	http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
	h.renderReset(w, http.StatusOK, resetData{Done: true, ProvedAddress: pr.ProvedAddress})
}
