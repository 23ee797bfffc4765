package dashboard

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/store"
)

const (
	sessionCookie = "posthaste_session"
	// formCSRFCookie holds the CSRF token of the forms shown before sign-in
	// (sign-in, password reset, joining by invitation).
	formCSRFCookie  = "posthaste_login_csrf"
	sessionLifetime = account.SessionLifetime
)

type sessionKey struct{}

func randomToken() string { return account.RandomToken() }

func base64URL(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func base64URLDecode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func tokenHash(tok string) []byte { return account.TokenHash(tok) }

func (h *Handler) cookie(name, value string, maxAge time.Duration) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/dashboard/", HttpOnly: true,
		Secure: h.cfg.SecureCookies, SameSite: http.SameSiteLaxMode, MaxAge: int(maxAge.Seconds())}
}

// signedIn requires a session that passed every factor; POSTs also
// require its CSRF token. A member of a team that requires a second factor
// and has none reaches only the account page, to set one up.
func (h *Handler) signedIn(next func(http.ResponseWriter, *http.Request, *store.Session)) http.Handler {
	return h.session(false, next)
}

// pendingMFA requires a session waiting for its second factor.
func (h *Handler) pendingMFA(next func(http.ResponseWriter, *http.Request, *store.Session)) http.Handler {
	return h.session(true, next)
}

// cookieSession returns the live session of the request's cookie, nil when
// there is none (dropping a stale cookie).
func (h *Handler) cookieSession(w http.ResponseWriter, r *http.Request) (*store.Session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	se, err := h.accounts.Sessions.Use(r.Context(), tokenHash(c.Value), h.now(), h.cfg.SessionIdleTimeout)
	if errors.Is(err, store.ErrNotFound) {
		http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &se, nil
}

func (h *Handler) session(pending bool, next func(http.ResponseWriter, *http.Request, *store.Session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		se, err := h.cookieSession(w, r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if se == nil {
			h.toLogin(w, r)
			return
		}
		if r.Method == http.MethodPost && !sameToken(r.PostFormValue("csrf"), se.CSRFToken) {
			http.Error(w, "The form has expired. Go back, reload the page and try again.", http.StatusForbidden)
			return
		}
		if se.MFAPending != pending {
			target := "/dashboard/emails"
			if se.MFAPending {
				target = "/dashboard/login/mfa"
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		if !pending && !strings.HasPrefix(r.URL.Path, "/dashboard/account") {
			m, err := h.accounts.Sessions.MFA(r.Context(), se.UserID, se.TeamID)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			if m.TeamRequires && m.EnabledAt == nil {
				http.Redirect(w, r, "/dashboard/account", http.StatusSeeOther)
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, se)), se)
	})
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (h *Handler) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "Sign in first.", http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, "/dashboard/login?next="+r.URL.EscapedPath(), http.StatusSeeOther)
}

// formToken sets the CSRF cookie of a form shown before sign-in and
// returns the token for the form's csrf field.
func (h *Handler) formToken(w http.ResponseWriter) string {
	tok := randomToken()
	http.SetCookie(w, h.cookie(formCSRFCookie, tok, time.Hour))
	return tok
}

// formTokenOK checks the CSRF token of a form posted before sign-in
// (double submit: the field must match the cookie).
func formTokenOK(r *http.Request) bool {
	c, err := r.Cookie(formCSRFCookie)
	return err == nil && sameToken(r.PostFormValue("csrf"), c.Value)
}

// formExpired answers a form posted before sign-in without its CSRF token.
const formExpired = "The form has expired. Try again."

// safeNext keeps redirects after login inside the dashboard.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/dashboard/") && !strings.HasPrefix(next, "//") && !strings.Contains(next, `\`) {
		return next
	}
	return "/dashboard/emails"
}

// serverBusy answers a request refused for want of capacity.
const serverBusy = "The server is busy. Try again in a few seconds."

// busyRetry is the Retry-After of an answer to ErrOverloaded: about the
// time a queue of hashes takes to drain.
const busyRetry = 2 * time.Second

// startSession signs a user in (after a password or an OAuth provider):
// into the oldest team, waiting for the second factor when the user has one.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, u store.User, next string) {
	tok := randomToken()
	se, err := h.accounts.Sessions.Start(r.Context(), account.SignIn{UserID: u.ID, Token: tok, CSRFToken: randomToken(),
		ClientAddr: clientAddrOf(r), UserAgent: clipUserAgent(r.UserAgent()), Now: h.now()})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pending, lifetime := se.MFAPending, sessionLifetime
	if pending {
		lifetime = account.PendingLifetime
	}
	h.recordSignIn(r, u.ID, &se.TeamID, true, map[string]any{"second_factor_due": pending})
	http.SetCookie(w, h.cookie(formCSRFCookie, "", -time.Second))
	http.SetCookie(w, h.cookie(sessionCookie, tok, lifetime))
	if pending {
		http.Redirect(w, r, "/dashboard/login/mfa?next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// requireOwner reports whether the session's user owns its team; when not,
// it answers with refuse (or a failure) and returns false.
func (h *Handler) requireOwner(w http.ResponseWriter, r *http.Request, se *store.Session, refuse func()) bool {
	role, err := h.accounts.Sessions.Role(r.Context(), se.TeamID, se.UserID)
	if err != nil {
		h.fail(w, r, err)
		return false
	}
	if role != "owner" {
		refuse()
		return false
	}
	return true
}
