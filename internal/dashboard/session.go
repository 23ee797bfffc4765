package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/store"
)

const (
	sessionCookie = "posthaste_session"
	// formCSRFCookie holds the CSRF token of the forms shown before sign-in
	// (sign-in, password reset, joining by invitation).
	formCSRFCookie  = "posthaste_login_csrf"
	sessionLifetime = 14 * 24 * time.Hour
	// pendingLifetime is how long a session that passed the password waits
	// for its second factor.
	pendingLifetime = 10 * time.Minute
)

type sessionKey struct{}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func base64URL(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func base64URLDecode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func tokenHash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

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
	se, err := h.store.Sessions.UseSession(r.Context(), tokenHash(c.Value), h.now(), h.cfg.SessionIdleTimeout)
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
			m, err := h.store.Sessions.UserMFA(r.Context(), se.UserID, se.TeamID)
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

type loginData struct {
	Email     string
	Error     string
	Next      string
	Providers []providerLink
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.renderLogin(w, http.StatusOK, loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (h *Handler) renderLogin(w http.ResponseWriter, status int, d loginData) {
	if d.Next == "" {
		d.Next = "/dashboard/emails"
	}
	d.Providers = h.providersShown(d.Next)
	h.render(w, status, "login", view{Title: "Sign in", CSRF: h.formToken(w), Data: d})
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

const (
	badCredentials = "Invalid email or password."
	tooManySignIns = "Too many failed sign-in attempts. Wait a few minutes and try again."
	serverBusy     = "The server is busy. Try again in a few seconds."
)

// busyRetry is the Retry-After of an answer to ErrOverloaded: about the
// time a queue of hashes takes to drain.
const busyRetry = 2 * time.Second

// rankKey counts the sign-ins of a client address for the password pool's
// ranking; unlike address, it is never refunded.
func rankKey(address throttleKey) throttleKey {
	return throttleKey{Name: "rank|" + address.Name, Limit: address.Limit}
}

// signInKeys are the throttle keys of a sign-in: the account with the
// client address, the client address, and the account.
func signInKeys(email, addr string) (pair, address, account throttleKey) {
	return throttleKey{Name: "signin|" + email + "|" + addr, Limit: pairLimit},
		throttleKey{Name: "addr|" + addr, Limit: addressLimit},
		throttleKey{Name: "account|" + email, Limit: accountLimit}
}

// login checks a password. The attempt is charged to the throttles before
// the hash, so parallel attempts count as they start; the hash waits its
// turn in the password pool, ranked by the client address's recent
// attempts (refunds do not lower the rank), so that an address that is not
// flooding gets ahead of those that are. Unknown accounts cost the same hash and the same throttles.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
	pw := r.PostFormValue("password")
	d := loginData{Email: email, Next: safeNext(r.PostFormValue("next"))}
	if !formTokenOK(r) {
		d.Error = formExpired
		h.renderLogin(w, http.StatusForbidden, d)
		return
	}
	if len(email) > 254 { // RFC 5321 §4.5.3.1.3 path limit: no account has it
		d.Email, d.Error = "", badCredentials
		h.renderLogin(w, http.StatusUnauthorized, d)
		return
	}
	now := h.now()
	pair, address, account := signInKeys(email, clientIP(r))
	rank := h.throttle.Note(rankKey(address), now)
	if ok, wait := h.throttle.Take(now, pair, address, account); !ok {
		retryAfter(w, wait)
		d.Error = tooManySignIns
		h.renderLogin(w, http.StatusTooManyRequests, d)
		return
	}
	u, err := h.store.Accounts.UserByEmail(r.Context(), email)
	hash := dummyHash
	if err == nil && u.PasswordHash != "" {
		hash = u.PasswordHash
	} else if err == nil || errors.Is(err, store.ErrNotFound) {
		// Unknown, or signs in through a provider only: spend the same
		// time as a real check, so timing does not tell which.
		err, u = nil, store.User{}
	}
	ok := false
	if err == nil {
		ok, err = h.passwords.Verify(password.WithRank(r.Context(), rank), pw, hash)
		ok = ok && hash != dummyHash
	}
	if err != nil {
		// The attempt did not run: it counts for nothing.
		h.throttle.Refund(h.now(), pair, address, account)
		if busy(err) {
			retryAfter(w, busyRetry)
			d.Error = serverBusy
			h.renderLogin(w, http.StatusServiceUnavailable, d)
			return
		}
		h.fail(w, r, err)
		return
	}
	if !ok {
		h.signInFailed(r, u.ID, map[string]any{"factor": "password"})
		d.Error = badCredentials
		h.renderLogin(w, http.StatusUnauthorized, d)
		return
	}
	// The failures of others stay charged to the account and the address.
	h.throttle.Refund(h.now(), address, account)
	h.throttle.Reset(pair.Name)
	h.startSession(w, r, u, d.Next)
}

// startSession signs a user in (after a password or an OAuth provider):
// into the oldest team, waiting for the second factor when the user has one.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, u store.User, next string) {
	team, err := h.store.Sessions.FirstTeam(r.Context(), u.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	m, err := h.store.Sessions.UserMFA(r.Context(), u.ID, team)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pending := m.EnabledAt != nil
	lifetime := sessionLifetime
	if pending {
		lifetime = pendingLifetime
	}
	tok := randomToken()
	if err := h.store.Sessions.CreateSession(r.Context(), store.Session{IDHash: tokenHash(tok), UserID: u.ID, TeamID: team,
		CSRFToken: randomToken(), ExpiresAt: h.now().Add(lifetime), MFAPending: pending,
		ClientAddr: clientAddrOf(r), UserAgent: clipUserAgent(r.UserAgent()), LastUsedAt: h.now()}); err != nil {
		h.fail(w, r, err)
		return
	}
	h.recordSignIn(r, u.ID, &team, true, map[string]any{"second_factor_due": pending})
	http.SetCookie(w, h.cookie(formCSRFCookie, "", -time.Second))
	http.SetCookie(w, h.cookie(sessionCookie, tok, lifetime))
	if pending {
		http.Redirect(w, r, "/dashboard/login/mfa?next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// dummyHash is an argon2id hash of a random password, checked against
// unknown emails.
const dummyHash = "$argon2id$v=19$m=65536,t=3,p=2$AqHSPjAd0P5pokvZKMSSlQ$sJeOv3uPCMbLbahRyiWsfbpX6F8I/tm91A7hzw8NLr8"

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if err := h.store.Sessions.DeleteSession(r.Context(), se.IDHash); err != nil {
		h.fail(w, r, err)
		return
	}
	if !h.audited(w, r, se, audit.SignOut, "user", se.UserID.String(), nil) {
		return
	}
	http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}

func (h *Handler) logoutEverywhere(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if err := h.store.Sessions.DeleteUserSessions(r.Context(), se.UserID); err != nil {
		h.fail(w, r, err)
		return
	}
	if !h.audited(w, r, se, audit.SignOut, "user", se.UserID.String(), map[string]any{"everywhere": true}) {
		return
	}
	http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}
