package dashboard

import (
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/posthaste/posthaste/internal/store"
)

// sessionRow is one of the user's sessions on the account page. ID names
// it in the revoke form: the base64url of the hash of its cookie, from
// which the cookie cannot be recovered.
type sessionRow struct {
	store.Session
	ID      string
	Current bool
}

// userSessions lists the live sessions of se's user, se's own marked.
func (h *teamHandler) userSessions(r *http.Request, se *store.Session) ([]sessionRow, error) {
	list, err := h.accounts.Sessions.List(r.Context(), se.UserID, h.now(), h.cfg.SessionIdleTimeout)
	if err != nil {
		return nil, err
	}
	rows := make([]sessionRow, len(list))
	for i, s := range list {
		rows[i] = sessionRow{Session: s, ID: base64URL(s.IDHash), Current: string(s.IDHash) == string(se.IDHash)}
	}
	return rows, nil
}

// revokeSession ends one session of the signed-in user; another user's
// session is not found. Ending the current one signs out.
func (h *teamHandler) revokeSession(w http.ResponseWriter, r *http.Request, se *store.Session) {
	hash, err := base64URLDecode(r.PostFormValue("session"))
	if err != nil {
		err = store.ErrNotFound
	} else {
		err = h.accounts.Sessions.Revoke(r.Context(), se.UserID, hash, string(hash) == string(se.IDHash), by(r, se))
	}
	if errors.Is(err, store.ErrNotFound) {
		h.renderAccount(w, r, se, http.StatusNotFound, accountData{Error: "That session has already ended."})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if string(hash) == string(se.IDHash) {
		http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/dashboard/account#sessions", http.StatusSeeOther)
}

// revokeOtherSessions ends every session of the user but this one.
func (h *teamHandler) revokeOtherSessions(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if err := h.accounts.Sessions.RevokeOthers(r.Context(), se.UserID, se.IDHash, by(r, se)); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/account#sessions", http.StatusSeeOther)
}

// maxUserAgent bounds the user agent a session keeps.
const maxUserAgent = 300

// clipUserAgent cuts a user agent to maxUserAgent bytes at a rune boundary.
func clipUserAgent(ua string) string {
	if len(ua) <= maxUserAgent {
		return ua
	}
	ua = ua[:maxUserAgent]
	for !utf8.ValidString(ua) {
		ua = ua[:len(ua)-1]
	}
	return ua
}
