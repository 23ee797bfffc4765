package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/store"
)

// signInHandler serves the pages shown before sign-in (password, OAuth
// providers, password reset) and signing out (signin.go, oauth.go,
// reset.go).
type signInHandler struct{ *Handler }

// routes adds the pages shown before sign-in (password, OAuth
// providers, password reset) and signing out.
func (h *signInHandler) routes(m *http.ServeMux) {
	m.HandleFunc("GET /dashboard/login", h.loginPage)
	m.HandleFunc("POST /dashboard/login", h.login)
	m.HandleFunc("GET /dashboard/forgot", h.forgotPage)
	m.HandleFunc("POST /dashboard/forgot", h.forgot)
	m.HandleFunc("GET /dashboard/reset/{token}", h.resetPage)
	m.HandleFunc("POST /dashboard/reset/{token}", h.reset)
	m.HandleFunc("GET /dashboard/oauth/{provider}/start", h.oauthStart)
	m.HandleFunc("GET /dashboard/oauth/{provider}/callback", h.oauthCallback)
	m.Handle("POST /dashboard/logout", h.signedIn(h.logout))
	m.Handle("POST /dashboard/logout-everywhere", h.signedIn(h.logoutEverywhere))
}

const (
	badCredentials = "Invalid email or password."
	tooManySignIns = "Too many failed sign-in attempts. Wait a few minutes and try again."
)

type loginData struct {
	Email     string
	Error     string
	Next      string
	Providers []providerLink
}

func (h *signInHandler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.renderLogin(w, http.StatusOK, loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (h *signInHandler) renderLogin(w http.ResponseWriter, status int, d loginData) {
	if d.Next == "" {
		d.Next = "/dashboard/emails"
	}
	d.Providers = h.providersShown(d.Next)
	h.render(w, status, "login", view{Title: "Sign in", CSRF: h.formToken(w), Data: d})
}

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
func (h *signInHandler) login(w http.ResponseWriter, r *http.Request) {
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
	u, err := h.accounts.Members.UserByEmail(r.Context(), email)
	decoy := h.passwords.Decoy()
	hash := decoy
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
		ok = ok && hash != decoy
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

func (h *signInHandler) logout(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if err := h.accounts.Sessions.SignOut(r.Context(), se.UserID, se.IDHash, false, by(r, se)); err != nil {
		h.fail(w, r, err)
		return
	}
	http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}

func (h *signInHandler) logoutEverywhere(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if err := h.accounts.Sessions.SignOut(r.Context(), se.UserID, se.IDHash, true, by(r, se)); err != nil {
		h.fail(w, r, err)
		return
	}
	http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}
